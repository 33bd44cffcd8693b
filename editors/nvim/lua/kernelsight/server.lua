-- How the language server process is started. Shared by lsp/kernelsight.lua (the config
-- vim.lsp.enable() reads), setup() and :checkhealth, so all three agree on the command.
local M = {}

--- Options set through require('kernelsight').setup(); empty until setup() runs.
M.opts = {}

--- The interpreter the user chose: setup{ python = ... }, else vim.g.kernelsight_python.
---@return string|nil
function M.python()
  local py = M.opts.python or vim.g.kernelsight_python
  if type(py) == 'string' and py ~= '' then
    return vim.fn.expand(py)
  end
  return nil
end

--- The command line of `kernelsight serve`:
---   1. setup{ cmd = {...} } verbatim;
---   2. { <python>, '-m', 'kernelsight', 'serve' } when a python is configured;
---   3. { 'kernelsight', 'serve' } when the console script is on PATH;
---   4. { 'python3', '-m', 'kernelsight', 'serve' } otherwise (health explains a failure).
--- setup{ server_args = {...} } is appended to 2-4.
---@return string[]
function M.cmd()
  if type(M.opts.cmd) == 'table' and #M.opts.cmd > 0 then
    return vim.deepcopy(M.opts.cmd)
  end
  local cmd
  local py = M.python()
  if py then
    cmd = { py, '-m', 'kernelsight', 'serve' }
  elseif vim.fn.executable('kernelsight') == 1 then
    cmd = { 'kernelsight', 'serve' }
  else
    cmd = { 'python3', '-m', 'kernelsight', 'serve' }
  end
  vim.list_extend(cmd, M.opts.server_args or {})
  return cmd
end

--- The command that prints the version: the serve command with `serve` (and what follows)
--- replaced by `--version`.
---@param cmd string[]
---@return string[]
function M.version_cmd(cmd)
  local out = {}
  for _, a in ipairs(cmd) do
    if a == 'serve' then break end
    table.insert(out, a)
  end
  table.insert(out, '--version')
  return out
end

--- Settings sent as workspace/configuration section `kernelsight` (and initializationOptions):
--- setup{ settings = {...} }, else vim.g.kernelsight_settings. Only what the user set is sent,
--- so that [tool.kernelsight] in pyproject.toml keeps applying to everything else.
---@return table
function M.settings()
  local s = M.opts.settings or vim.g.kernelsight_settings or {}
  if next(s) == nil then
    -- An empty Lua table would be sent as a JSON array.
    return vim.empty_dict()
  end
  return vim.deepcopy(s)
end

return M
