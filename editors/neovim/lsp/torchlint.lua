-- Neovim 0.11+: copy to ~/.config/nvim/lsp/torchlint.lua (or put editors/neovim on
-- 'runtimepath'), then call vim.lsp.enable("torchlint") from your config.
return {
  cmd = { "torchlint", "server" },
  filetypes = { "python" },
  root_markers = { "pyproject.toml", "torchlint.toml", ".git" },
  init_options = { debounceMs = 30, shapes = true },
}
