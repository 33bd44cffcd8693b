-- :checkhealth kernelsight
local server = require('kernelsight.server')

local M = {}

local function run(cmd, timeout_ms)
  local ok, proc = pcall(vim.system, cmd, { text = true })
  if not ok then
    return nil, tostring(proc)
  end
  local r = proc:wait(timeout_ms)
  -- vim.system reports a wait() timeout as exit code 124 after killing the process.
  if r.code == 124 then
    return nil, ('no answer within %d ms'):format(timeout_ms)
  end
  return r
end

local function trim(s)
  return (s or ''):gsub('%s+$', '')
end

--- The interpreter behind `cmd`: its first word when it runs `-m kernelsight`, else the
--- shebang of the console script.
local function interpreter_of(cmd)
  if cmd[2] == '-m' then
    return cmd[1]
  end
  local path = vim.fn.exepath(cmd[1])
  if path == '' then
    return nil
  end
  local f = io.open(path, 'r')
  if not f then
    return nil
  end
  local first = f:read('*l') or ''
  f:close()
  local shebang = first:match('^#!%s*(%S+)')
  if shebang and shebang:match('env$') then
    return first:match('^#!%s*%S+%s+(%S+)')
  end
  return shebang
end

-- Reads installed versions from package metadata: fast, imports neither torch nor triton.
local PROBE = [[
import sys, importlib.metadata as md
print("python", sys.version.split()[0], sys.executable)
for name in ("kernelsight", "pygls", "lsprotocol", "tree-sitter", "z3-solver", "triton", "torch", "litellm"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "-")
]]

function M.check()
  vim.health.start('Neovim')
  local v = vim.version()
  local vs = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    vim.health.ok('Neovim ' .. vs .. ' (vim.lsp.config / vim.lsp.enable available)')
  else
    vim.health.error('Neovim ' .. vs .. ' is too old', { 'Kernelsight needs Neovim 0.11 or newer.' })
    return
  end

  vim.health.start('Kernelsight server')
  local cmd = server.cmd()
  vim.health.info('command: ' .. table.concat(cmd, ' '))
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    vim.health.error(('%s not found'):format(cmd[1]), {
      'Install kernelsight in the Python environment of your project: python -m pip install kernelsight',
      "or point the plugin at that environment: require('kernelsight').setup{ python = '/path/to/venv/bin/python' }",
    })
    return
  end
  vim.health.ok('executable: ' .. exe)

  local r, err = run(server.version_cmd(cmd), 20000)
  if not r then
    vim.health.error('could not run ' .. table.concat(server.version_cmd(cmd), ' ') .. ': ' .. err)
    return
  end
  local out = trim(r.stdout) .. trim(r.stderr)
  if r.code ~= 0 then
    -- Only the package itself missing; a missing submodule is a broken install.
    local missing = false
    for line in (r.stderr .. '\n' .. r.stdout):gmatch('[^\n]+') do
      if line:match("No module named '?kernelsight'?%s*$") then missing = true end
    end
    if missing then
      vim.health.error(('kernelsight is not installed for %s'):format(cmd[1]),
        { 'python -m pip install kernelsight (in that environment)' })
    else
      vim.health.error(('%s exited with %d: %s'):format(table.concat(server.version_cmd(cmd), ' '), r.code, out))
    end
    return
  end
  vim.health.ok(out)

  local python = interpreter_of(cmd)
  if not python then
    vim.health.warn('could not tell which Python runs ' .. cmd[1])
  else
    local pr = run({ python, '-c', PROBE }, 20000)
    if not pr or pr.code ~= 0 then
      vim.health.warn('could not query ' .. python .. ': ' .. trim(pr and pr.stderr or ''))
    else
      local found = {}
      for line in pr.stdout:gmatch('[^\n]+') do
        local name, rest = line:match('^(%S+)%s+(.*)$')
        if name then found[name] = rest end
      end
      vim.health.ok('python ' .. (found.python or '?'))
      for _, name in ipairs({ 'pygls', 'lsprotocol', 'tree-sitter', 'z3-solver' }) do
        if found[name] and found[name] ~= '-' then
          vim.health.ok(name .. ' ' .. found[name])
        else
          vim.health.error(name .. ' is missing (a dependency of the server)')
        end
      end
      local needs = {
        triton = 'Optimize and Benchmark need it',
        torch = 'Optimize and Benchmark need it',
        litellm = 'Benchmark and the built-in tuner work; Optimize with an LLM needs it',
      }
      for _, name in ipairs({ 'triton', 'torch', 'litellm' }) do
        if found[name] and found[name] ~= '-' then
          vim.health.ok(name .. ' ' .. found[name])
        else
          vim.health.warn(name .. ' is not installed: diagnostics and hover work; ' .. needs[name],
            { 'python -m pip install "kernelsight[agent]"' })
        end
      end
    end
  end

  vim.health.start('Kernelsight client')
  local clients = vim.lsp.get_clients({ name = 'kernelsight' })
  if #clients == 0 then
    vim.health.info("no kernelsight client is running (it starts on a Python buffer after vim.lsp.enable('kernelsight'))")
  else
    for _, c in ipairs(clients) do
      local bufs = vim.tbl_keys(c.attached_buffers or {})
      vim.health.ok(('client %d running, root %s, %d buffer(s) attached'):format(
        c.id, tostring(c.root_dir), #bufs))
    end
  end
end

return M
