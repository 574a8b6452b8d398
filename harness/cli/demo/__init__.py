"""What the ``demo``, ``replay`` and ``run`` commands share: the runner, the meter and the chart.

* :mod:`harness.cli.demo.runner`: the offline demo and the transcript replay.
* :mod:`harness.cli.demo.measure`: tokens per request, with and without a stack.
* :mod:`harness.cli.demo.chart`: the comparison table, the terminal chart and the PNG.
"""

from __future__ import annotations

__all__: list[str] = []
