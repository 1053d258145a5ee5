-- Headless Neovim (0.7+) as a torchlint language-server client.
--
--   TORCHLINT_SERVER_CMD='["python", "-m", "torchlint", "server"]' \
--     nvim --headless --clean buggy.py -c 'luafile tests/nvim/diagnostics.lua'
--
-- Attaches torchlint to the current buffer, waits for its diagnostics and prints them, one
-- "DIAGNOSTIC line:col code message" per line (1-based), then asks for the code actions of
-- the first one, applies "Disable <code> for this line", waits for the diagnostic to go
-- and hovers the noqa code. Everything goes to stdout; the exit status is 0 on success.
-- Uses vim.lsp.start_client + buf_attach_client, which 0.7 has (vim.lsp.start is 0.8+).

local function out(line)
  io.stdout:write(line .. "\n")
  io.stdout:flush()
end

local function finish(status)
  for _, client in pairs(vim.lsp.get_active_clients()) do
    client.stop()
  end
  vim.wait(2000, function()
    return #vim.lsp.get_active_clients() == 0
  end, 50)
  vim.cmd(status == 0 and "qall!" or "cquit!")
end

local timeout = tonumber(os.getenv("TORCHLINT_NVIM_TIMEOUT") or "20000")
local cmd = vim.fn.json_decode(os.getenv("TORCHLINT_SERVER_CMD") or '["torchlint", "server"]')
local bufnr = vim.api.nvim_get_current_buf()

local client_id = vim.lsp.start_client({
  name = "torchlint",
  cmd = cmd,
  root_dir = vim.fn.getcwd(),
  on_exit = function(code, signal)
    out(string.format("EXIT %d %d", code, signal))
  end,
})
if not client_id then
  out("ERROR cannot start " .. table.concat(cmd, " "))
  finish(1)
  return
end
vim.lsp.buf_attach_client(bufnr, client_id)

local function torchlint_diagnostics()
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source == "torchlint" then
      table.insert(found, d)
    end
  end
  return found
end

local function lsp_code(d)
  -- 0.7 keeps the LSP fields in user_data.lsp; later versions also copy `code` to the top.
  return d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code) or "?"
end

if not vim.wait(timeout, function()
  return #torchlint_diagnostics() > 0
end, 20) then
  out("ERROR no diagnostics within " .. timeout .. " ms")
  finish(1)
  return
end

local diagnostics = torchlint_diagnostics()
for _, d in ipairs(diagnostics) do
  out(string.format("DIAGNOSTIC %d:%d %s %s", d.lnum + 1, d.col + 1, lsp_code(d), d.message))
end

-- Code actions for the first diagnostic, as `vim.lsp.buf.code_action()` asks for them.
local first = diagnostics[1]
local code = lsp_code(first)
-- Back to LSP form, as the client's own code-action request does.
local lsp_diagnostic = {
  range = {
    start = { line = first.lnum, character = first.col },
    ["end"] = { line = first.end_lnum, character = first.end_col },
  },
  severity = first.severity,
  message = first.message,
  source = first.source,
  code = code,
}
local params = {
  textDocument = { uri = vim.uri_from_bufnr(bufnr) },
  range = {
    start = { line = first.lnum, character = first.col },
    ["end"] = { line = first.lnum, character = first.col },
  },
  context = { diagnostics = { lsp_diagnostic } },
}
local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, timeout)
local disable
for _, response in pairs(responses or {}) do
  for _, action in ipairs(response.result or {}) do
    out("ACTION " .. action.title)
    if action.title == "Disable " .. code .. " for this line" then
      disable = action
    end
  end
end
if not disable then
  out("ERROR no disable action")
  finish(1)
  return
end
vim.lsp.util.apply_workspace_edit(disable.edit, "utf-16")
out("LINE " .. vim.api.nvim_buf_get_lines(bufnr, first.lnum, first.lnum + 1, false)[1])

local function still_there()
  for _, d in ipairs(torchlint_diagnostics()) do
    if d.lnum == first.lnum and lsp_code(d) == code then
      return true
    end
  end
  return false
end
if vim.wait(timeout, function()
  return not still_there()
end, 20) then
  out("SILENCED " .. code)
else
  out("ERROR " .. code .. " still reported after the noqa edit")
  finish(1)
  return
end

-- Hover on the code inside the new noqa comment.
local line = vim.api.nvim_buf_get_lines(bufnr, first.lnum, first.lnum + 1, false)[1]
local column = line:find(code, line:find("noqa", 1, true), true)
local hover = vim.lsp.buf_request_sync(bufnr, "textDocument/hover", {
  textDocument = { uri = vim.uri_from_bufnr(bufnr) },
  position = { line = first.lnum, character = column },
}, timeout)
for _, response in pairs(hover or {}) do
  if response.result then
    local value = response.result.contents.value or ""
    out("HOVER " .. (vim.split(value, "\n")[1] or ""))
  end
end

finish(0)
