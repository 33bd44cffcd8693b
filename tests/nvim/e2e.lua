-- Driven by tests/test_editor_nvim.py inside a headless Neovim on a buggy example.
-- Every observation is printed as one line `KS_E2E <json>`; the Python test asserts on them,
-- so a failure shows what Neovim actually saw. Inputs: KS_CODE (e.g. KS101) and KS_LINE
-- (0-based line of the BUG marker).
local function emit(event, data)
  data = data or {}
  data.event = event
  io.stdout:write('KS_E2E ' .. vim.json.encode(data) .. '\n')
  io.stdout:flush()
end

local function finish(code)
  vim.cmd((code == 0) and 'qa!' or ('cquit ' .. code))
end

local function fail(msg)
  emit('fail', { message = msg })
  finish(1)
end

-- A Lua error anywhere ends Neovim with a failure instead of leaving it waiting headless.
local function main()
  local CODE = assert(vim.env.KS_CODE)
  local LINE = tonumber(assert(vim.env.KS_LINE))
  local TIMEOUT = tonumber(vim.env.KS_TIMEOUT_MS or '90000')
  local buf = vim.api.nvim_get_current_buf()

  local function ours()
    local out = {}
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      if d.source == 'kernelsight' and d.code == CODE then
        table.insert(out, d)
      end
    end
    return out
  end

  local function all_diags()
    local out = {}
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      table.insert(out, { code = d.code, line = d.lnum, col = d.col, source = d.source, message = d.message })
    end
    return out
  end

  -- Counts diagnostic updates of the buffer (push or pull alike), so that "cleared after save"
  -- means "an update after the save no longer has it", not "nothing arrived yet".
  local updates = 0
  vim.api.nvim_create_autocmd('DiagnosticChanged', { buffer = buf, callback = function()
    updates = updates + 1 end })

  -- 1. the client from lsp/kernelsight.lua attaches to the python buffer
  local client, exited
  vim.api.nvim_create_autocmd('LspDetach', { callback = function() exited = true end })
  if not vim.wait(30000, function()
    client = vim.lsp.get_clients({ bufnr = buf, name = 'kernelsight' })[1]
    return exited or (client ~= nil and client.initialized)
  end, 50) or exited then
    local f = io.open(vim.lsp.log.get_filename())
    local log = f and f:read('*a') or '(no LSP log)'
    if f then f:close() end
    return fail('kernelsight client did not attach (filetype=' .. vim.bo[buf].filetype .. ')\n'
      .. log:sub(-3000))
  end
  emit('attached', { root = client.root_dir, cmd = client.config.cmd, filetype = vim.bo[buf].filetype,
    server = client.server_info })

  -- 2. the diagnostic of the BUG marker arrives (published after the full analysis on open)
  if not vim.wait(TIMEOUT, function() return #ours() > 0 end, 50) then
    return fail('no ' .. CODE .. ' diagnostic; diagnostics were ' .. vim.json.encode(all_diags()))
  end
  local d = ours()[1]
  local lsp_d = (d.user_data or {}).lsp or {}
  emit('diagnostic', {
    code = d.code, line = d.lnum, col = d.col, end_line = d.end_lnum, severity = d.severity,
    source = d.source, message = d.message,
    href = lsp_d.codeDescription and lsp_d.codeDescription.href or nil,
    related = lsp_d.relatedInformation and #lsp_d.relatedInformation or 0,
    all = all_diags(),
  })

  -- 3. hover on the diagnostic's start
  local pos = { textDocument = vim.lsp.util.make_text_document_params(buf),
    position = { line = d.lnum, character = d.col } }
  local hov = vim.lsp.buf_request_sync(buf, 'textDocument/hover', pos, 15000) or {}
  local res = hov[client.id] and hov[client.id].result
  local contents = res and res.contents or {}
  emit('hover', { kind = contents.kind, value = contents.value or vim.inspect(contents) })

  -- 3b. code lenses, requested by the plugin's LspAttach autocmd
  vim.wait(5000, function() return #vim.lsp.codelens.get(buf) > 0 end, 50)
  local lenses = {}
  for _, l in ipairs(vim.lsp.codelens.get(buf)) do
    table.insert(lenses, { line = l.range.start.line, title = l.command and l.command.title or nil,
      command = l.command and l.command.command or nil })
  end
  emit('codelens', { lenses = lenses })

  -- 4. code actions for the diagnostic; apply the quick fix that is not a suppression
  local params = {
    textDocument = vim.lsp.util.make_text_document_params(buf),
    range = { start = { line = d.lnum, character = d.col }, ['end'] = { line = d.end_lnum, character = d.end_col } },
    context = { diagnostics = { lsp_d }, only = { 'quickfix' } },
  }
  local ca = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, 15000) or {}
  local actions = (ca[client.id] and ca[client.id].result) or {}
  local titles, fix = {}, nil
  for _, a in ipairs(actions) do
    table.insert(titles, { title = a.title, kind = a.kind, preferred = a.isPreferred })
    local is_suppress = a.title:lower():find('suppress', 1, true) or a.title:find('noqa', 1, true)
    if not fix and not is_suppress and (a.kind or ''):match('^quickfix') then
      fix = a
    end
  end
  emit('actions', { actions = titles })
  if not fix then
    return fail('no quick fix other than a suppression among ' .. vim.json.encode(titles))
  end
  if not fix.edit and not fix.command and client:supports_method('codeAction/resolve') then
    local r = client:request_sync('codeAction/resolve', fix, 15000, buf)
    fix = (r and r.result) or fix
  end
  local before = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1]
  if fix.edit then
    vim.lsp.util.apply_workspace_edit(fix.edit, client.offset_encoding)
  end
  if fix.command then
    local done = false
    client:exec_cmd(fix.command, { bufnr = buf }, function() done = true end)
    vim.wait(15000, function() return done end, 50)
  end
  emit('applied', { title = fix.title, before = before,
    after = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1] })

  -- 5. :write -> didSave -> full analysis -> the diagnostic is gone
  local updates_at_write = updates
  vim.cmd('silent write')
  -- The server's own status command (kept for tests) tells when the full analysis of the saved
  -- text is done; only then is "no diagnostic" a verdict rather than "not analysed yet".
  local uri = vim.uri_from_bufnr(buf)
  local function full_is_current()
    local r = client:request_sync('workspace/executeCommand', { command = 'kernelsight.status' }, 5000, buf)
    local doc = r and r.result and r.result.documents and r.result.documents[uri]
    return doc ~= nil and doc.full ~= vim.NIL and doc.full == doc.version, doc
  end
  if not vim.wait(TIMEOUT, function() return (full_is_current()) end, 200) then
    local _, doc = full_is_current()
    return fail('the full analysis of the saved text did not finish: ' .. vim.json.encode(doc or {}))
  end
  if not vim.wait(TIMEOUT, function() return updates > updates_at_write and #ours() == 0 end, 50) then
    return fail('diagnostic ' .. CODE .. ' still present after the fix and :write: '
      .. vim.json.encode(all_diags()))
  end
  -- What the server answers now, for the analysed version (not only what the buffer shows).
  local pulled = client:request_sync('textDocument/diagnostic',
    { textDocument = vim.lsp.util.make_text_document_params(buf) }, 10000, buf)
  local pulled_codes = {}
  for _, item in ipairs((pulled and pulled.result and pulled.result.items) or {}) do
    table.insert(pulled_codes, item.code)
  end
  emit('after_save', { remaining = all_diags(), ours = #ours(), updates = updates - updates_at_write,
    pulled_kind = pulled and pulled.result and pulled.result.kind, pulled_codes = pulled_codes })

  -- 6. :KernelsightBenchmark on the kernel under the cursor (the fixed, saved file): the plugin
  -- finds the kernel through the server's lenses, the server reports $/progress, and the result
  -- becomes the last report.
  if vim.env.KS_BENCH == '1' then
    local ks = require('kernelsight')
    local progress = {}
    vim.api.nvim_create_autocmd('LspProgress', { callback = function(ev)
      local v = ev.data.params.value
      table.insert(progress, { kind = v.kind, title = v.title, message = v.message })
    end })
    vim.api.nvim_win_set_cursor(0, { LINE + 1, 4 })
    vim.cmd('KernelsightBenchmark')
    if not vim.wait(TIMEOUT * 2, function() return ks.last_report ~= nil end, 100) then
      return fail('no benchmark report; progress was ' .. vim.json.encode(progress))
    end
    local r = ks.last_report
    emit('benchmark', {
      command = r.command, kernel = r.kernel, error = r.error,
      ok = type(r.result) == 'table' and r.result.ok or nil,
      progress = progress, status_after = ks.status(),
      report = table.concat(ks.report_lines(r), '\n'),
    })
  end
  finish(0)
  end

  local ok, err = xpcall(main, debug.traceback)
  if not ok then
    fail('error in e2e.lua: ' .. tostring(err))
end
