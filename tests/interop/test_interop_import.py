"""harness.interop.pydantic_ai is imported only on request, and says how to install pydantic-ai."""

from __future__ import annotations

import subprocess
import sys


def test_importing_harness_interop_does_not_import_pydantic_ai() -> None:
    code = "import sys, harness.interop; print('pydantic_ai' in sys.modules, harness.interop.__all__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "[]"]


def test_missing_pydantic_ai_raises_interop_error_with_install_hint() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pydantic_ai' or name.startswith('pydantic_ai.'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from harness.errors import HarnessError\n"
        "try:\n"
        "    import harness.interop.pydantic_ai\n"
        "except HarnessError as exc:\n"
        "    print(type(exc).__name__, '|', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("InteropError |")
    assert 'pip install "harness-loop[pydantic-ai]"' in out.stdout
