"""torchlint's rules: one module per rule, discovered by `torchlint.registry`."""
