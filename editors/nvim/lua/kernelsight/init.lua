-- Kernelsight for Neovim >= 0.11: user commands, progress messages and code lens refresh on
-- top of the built-in LSP client. The server itself is configured by lsp/kernelsight.lua.
local server = require('kernelsight.server')

local M = {}

local NAME = 'kernelsight'
local SERVER_COMMANDS = { optimize = 'kernelsight.optimize', benchmark = 'kernelsight.benchmark' }

--- The last Optimize/Benchmark outcome: { command, kernel, bufnr, finished, result?, error? }.
M.last_report = nil

--- Progress of the server's running tasks, token -> { title, message, percentage }.
M.progress = {}

--- The options of the last setup() call (defaults merged).
M.opts = {}

local defaults = {
  -- Start the server with vim.lsp.enable('kernelsight') (false: the user enables it).
  enable = true,
  -- Refresh code lenses on these events in attached buffers.
  codelens = true,
  codelens_events = { 'BufEnter', 'InsertLeave', 'BufWritePost' },
  -- Echo $/progress of the server in the message area.
  progress = true,
}

local function notify(msg, level)
  vim.notify('[kernelsight] ' .. msg, level or vim.log.levels.INFO)
end

--- The kernelsight client attached to `bufnr` (default: current buffer), or nil.
---@param bufnr? integer
---@return vim.lsp.Client|nil
function M.client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr or 0, name = NAME })[1]
end

--- One line for a statusline: a running task (title, message, percentage), or '' when idle.
---@return string
function M.status()
  local line = ''
  for _, p in pairs(M.progress) do
    line = p.title .. (p.message and (': ' .. p.message) or '')
      .. (p.percentage and (' ' .. p.percentage .. '%') or '')
  end
  return line
end

-- Echoes one line cut to the free width of the command line, so that a long progress message
-- never raises a hit-enter prompt.
local function echo(text)
  local width = math.max(vim.v.echospace, 10)
  text = text:gsub('\n', ' ')
  if vim.fn.strdisplaywidth(text) > width then
    text = vim.fn.strcharpart(text, 0, width - 1) .. '…'
  end
  vim.api.nvim_echo({ { text } }, false, {})
end

local function on_progress(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if not client or client.name ~= NAME then
    return
  end
  local params = ev.data.params or {}
  local value, token = params.value or {}, tostring(params.token)
  if value.kind == 'begin' then
    M.progress[token] = { title = value.title or '', message = value.message, percentage = value.percentage }
  elseif value.kind == 'report' and M.progress[token] then
    local p = M.progress[token]
    p.message = value.message or p.message
    p.percentage = value.percentage or p.percentage
  elseif value.kind == 'end' then
    local p = M.progress[token]
    M.progress[token] = nil
    if M.opts.progress and p then
      echo(('[kernelsight] %s: %s'):format(p.title, value.message or 'done'))
    end
    return
  end
  if M.opts.progress then
    echo('[kernelsight] ' .. M.status())
  end
end

local function on_attach(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if not client or client.name ~= NAME or not M.opts.codelens then
    return
  end
  if not client:supports_method('textDocument/codeLens', ev.buf) then
    return
  end
  require('kernelsight.pull').codelens_buffers[ev.buf] = true
  local group = vim.api.nvim_create_augroup('kernelsight_codelens_' .. ev.buf, { clear = true })
  vim.api.nvim_create_autocmd(M.opts.codelens_events, {
    group = group,
    buffer = ev.buf,
    callback = function()
      vim.lsp.codelens.refresh({ bufnr = ev.buf })
    end,
  })
  vim.lsp.codelens.refresh({ bufnr = ev.buf })
end

--- The name of the kernel whose lens is at `line` (0-based): the first `def NAME(` at or below.
local function kernel_name(bufnr, line)
  local lines = vim.api.nvim_buf_get_lines(bufnr, line, line + 40, false)
  for _, text in ipairs(lines) do
    local name = text:match('^%s*def%s+([%a_][%w_]*)%s*%(')
    if name then
      return name
    end
  end
  return 'line ' .. (line + 1)
end

--- The code lenses of `command` in `bufnr`, resolved, sorted by line.
local function kernel_lenses(client, bufnr, command)
  local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
  local resp, err = client:request_sync('textDocument/codeLens', params, 10000, bufnr)
  if not resp then
    return nil, 'codeLens request failed: ' .. tostring(err)
  end
  if resp.err then
    return nil, 'codeLens request failed: ' .. tostring(resp.err.message)
  end
  local out = {}
  for _, lens in ipairs(resp.result or {}) do
    if not lens.command and client:supports_method('codeLens/resolve', bufnr) then
      local r = client:request_sync('codeLens/resolve', lens, 10000, bufnr)
      lens = (r and r.result) or lens
    end
    if lens.command and lens.command.command == command then
      table.insert(out, lens)
    end
  end
  table.sort(out, function(a, b) return a.range.start.line < b.range.start.line end)
  return out
end

--- The lens of the kernel under the cursor: the nearest at or above `line`; the only one when
--- the cursor is above a single kernel; nil when the user has to choose.
function M.pick_lens(lenses, line)
  local chosen
  for _, lens in ipairs(lenses) do
    if lens.range.start.line <= line then
      chosen = lens
    end
  end
  if not chosen and #lenses == 1 then
    chosen = lenses[1]
  end
  return chosen
end

local token_counter = 0

--- Sends workspace/executeCommand for `lens` with a work-done token (so $/progress shows up as
--- LspProgress) and records the outcome as M.last_report.
local function execute(client, bufnr, lens, kind)
  local kernel = kernel_name(bufnr, lens.range.start.line)
  token_counter = token_counter + 1
  local token = ('kernelsight-nvim-%d-%d'):format(vim.fn.getpid(), token_counter)
  local params = {
    command = lens.command.command,
    arguments = lens.command.arguments,
    workDoneToken = token,
  }
  notify(('%s %s...'):format(kind == 'optimize' and 'Optimizing' or 'Benchmarking', kernel))
  local ok, request_id = client:request('workspace/executeCommand', params, function(err, result)
    M.last_report = {
      command = params.command,
      kernel = kernel,
      bufnr = bufnr,
      finished = os.date('!%Y-%m-%dT%H:%M:%SZ'),
      result = result,
      error = err and err.message or nil,
    }
    local failed = M.failure_reason(M.last_report)
    if failed then
      notify(('%s of %s failed: %s'):format(kind, kernel, failed), vim.log.levels.ERROR)
    else
      local summary = type(result) == 'table' and result.summary or nil
      notify(('%s of %s finished%s. :KernelsightReport shows it.'):format(
        kind, kernel, summary and (': ' .. summary) or ''))
    end
  end, bufnr)
  if not ok then
    notify('the server is not running', vim.log.levels.ERROR)
  end
  M.running = { client = client, id = request_id }
end

--- Runs the server's Optimize or Benchmark command on the kernel under the cursor.
---@param kind 'optimize'|'benchmark'
function M.run_kernel_command(kind)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = M.client(bufnr)
  if not client then
    notify('no kernelsight server is attached to this buffer (see :checkhealth kernelsight)',
      vim.log.levels.WARN)
    return
  end
  local command = SERVER_COMMANDS[kind]
  local lenses, err = kernel_lenses(client, bufnr, command)
  if not lenses then
    notify(err, vim.log.levels.ERROR)
    return
  end
  if #lenses == 0 then
    notify(('no kernel in this buffer offers %s (no @triton.jit kernel, or not analysed yet)'):format(kind),
      vim.log.levels.WARN)
    return
  end
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  local lens = M.pick_lens(lenses, line)
  if lens then
    execute(client, bufnr, lens, kind)
    return
  end
  vim.ui.select(lenses, {
    prompt = 'Kernel to ' .. kind .. ':',
    format_item = function(l) return kernel_name(bufnr, l.range.start.line) end,
  }, function(choice)
    if choice then
      execute(client, bufnr, choice, kind)
    end
  end)
end

--- Cancels the running Optimize/Benchmark request.
function M.cancel()
  local r = M.running
  if r and r.id then
    r.client:cancel_request(r.id)
    M.running = nil
    notify('cancel requested')
  end
end

--- The reason a report failed (request error or `ok = false` in the result), or nil.
function M.failure_reason(report)
  if report.error then
    return report.error
  end
  local r = report.result
  if type(r) == 'table' and r.ok == false then
    return (type(r.reason) == 'string' and r.reason) or (type(r.status) == 'string' and r.status) or 'failed'
  end
  return nil
end

--- The last report as markdown lines. The server answers {ok, reason?, applied?, status?,
--- output?}; a markdown string (or `markdown`/`report` field) is shown as it is, other values
--- as JSON.
---@return string[]
function M.report_lines(report)
  local title = report.command == SERVER_COMMANDS.optimize and 'Optimize' or 'Benchmark'
  local lines = {
    ('# %s: `%s`'):format(title, report.kernel),
    '',
    'File: ' .. vim.api.nvim_buf_get_name(report.bufnr),
    'Finished: ' .. report.finished,
    '',
  }
  local failed = M.failure_reason(report)
  if failed then
    vim.list_extend(lines, { '**Failed:** ' .. failed, '' })
  end
  if report.error then
    return lines
  end
  local r = report.result
  local parts = {}
  if type(r) == 'string' then
    parts = { r }
  elseif type(r) == 'table' and type(r.markdown) == 'string' then
    parts = { r.markdown }
  elseif type(r) == 'table' and type(r.report) == 'string' then
    parts = { r.report }
  elseif type(r) == 'table' then
    if type(r.applied) == 'boolean' then
      table.insert(parts, 'Rewrite applied: ' .. (r.applied and 'yes' or 'no')
        .. (type(r.reason) == 'string' and (' (' .. r.reason .. ')') or ''))
    end
    if vim.islist(r.output) and #r.output > 0 then
      table.insert(parts, '```text\n' .. table.concat(r.output, '\n') .. '\n```')
    end
    if #parts == 0 then
      parts = { '```json\n' .. vim.json.encode(r) .. '\n```' }
    end
  else
    parts = { '_The server returned no result._' }
  end
  vim.list_extend(lines, vim.split(table.concat(parts, '\n\n'), '\n', { plain = true }))
  return lines
end

--- Opens the last report in a scratch markdown buffer.
function M.show_report()
  if not M.last_report then
    notify('no report yet: run :KernelsightOptimize or :KernelsightBenchmark first')
    return
  end
  vim.cmd('botright new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.report_lines(M.last_report))
  vim.bo[buf].filetype = 'markdown'
  vim.bo[buf].modifiable = false
end

--- Configures the plugin.
---@param opts? { python?: string, cmd?: string[], server_args?: string[], settings?: table,
---   enable?: boolean, codelens?: boolean, codelens_events?: string[], progress?: boolean }
function M.setup(opts)
  opts = vim.tbl_deep_extend('force', defaults, opts or {})
  M.opts = opts
  server.opts = opts

  -- Only fields derived from the options are overridden; lsp/kernelsight.lua keeps the rest.
  local override = {}
  if opts.python or opts.cmd or opts.server_args then
    override.cmd = server.cmd()
  end
  if opts.settings then
    override.settings = { kernelsight = server.settings() }
    override.init_options = { kernelsight = server.settings() }
  end
  if next(override) then
    vim.lsp.config(NAME, override)
  end

  local group = vim.api.nvim_create_augroup('kernelsight', { clear = true })
  vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = on_progress })
  vim.api.nvim_create_autocmd('LspAttach', { group = group, callback = on_attach })

  vim.api.nvim_create_user_command('KernelsightOptimize', function() M.run_kernel_command('optimize') end,
    { desc = 'Kernelsight: optimize the kernel under the cursor' })
  vim.api.nvim_create_user_command('KernelsightBenchmark', function() M.run_kernel_command('benchmark') end,
    { desc = 'Kernelsight: benchmark the kernel under the cursor' })
  vim.api.nvim_create_user_command('KernelsightCancel', M.cancel,
    { desc = 'Kernelsight: cancel the running optimize/benchmark' })
  vim.api.nvim_create_user_command('KernelsightReport', M.show_report,
    { desc = 'Kernelsight: show the last optimize/benchmark report' })

  if opts.enable then
    vim.lsp.enable(NAME)
  end
end

return M
