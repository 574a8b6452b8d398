"""The offline demo: an embedded transcript replayed through the loop and a capability stack."""
