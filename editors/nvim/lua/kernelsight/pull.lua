-- workspace/diagnostic/refresh and workspace/codeLens/refresh for Neovim versions whose client
-- does not implement them.
--
-- Neovim 0.11/0.12 pull diagnostics (textDocument/diagnostic) only on didOpen and didChange.
-- Kernelsight's full invariant analysis finishes later (on open and on save) and then asks the
-- client to pull again with workspace/diagnostic/refresh; without a handler for that request
-- the findings of the full analysis would only show after the next keystroke. lsp/kernelsight.lua
-- announces the capability and routes the request here.
local M = {}

--- Handler of the server request workspace/diagnostic/refresh: pulls the diagnostics of every
--- buffer the client is attached to; the answers go through Neovim's own handler
--- (vim.lsp.diagnostic.on_diagnostic), exactly as its automatic pulls do.
---@param ctx lsp.HandlerContext
function M.on_refresh(_, _, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return vim.NIL
  end
  -- Answer first: the pulls are sent after the response to the refresh request.
  vim.schedule(function()
    for bufnr in pairs(client.attached_buffers or {}) do
      if vim.api.nvim_buf_is_loaded(bufnr) then
        client:request('textDocument/diagnostic', {
          textDocument = vim.lsp.util.make_text_document_params(bufnr),
        }, nil, bufnr)
      end
    end
  end)
  return vim.NIL
end

--- Buffers whose code lenses are shown (set by require('kernelsight').setup's LspAttach).
M.codelens_buffers = {}

--- Handler of the server request workspace/codeLens/refresh: the full analysis changes the lens
--- line (`4 invariants ✔ · 1 ✗`), which Neovim would otherwise show only after the next
--- refresh event.
---@param ctx lsp.HandlerContext
function M.on_codelens_refresh(_, _, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client then
    return vim.NIL
  end
  vim.schedule(function()
    for bufnr in pairs(client.attached_buffers or {}) do
      if M.codelens_buffers[bufnr] and vim.api.nvim_buf_is_loaded(bufnr) then
        vim.lsp.codelens.refresh({ bufnr = bufnr })
      end
    end
  end)
  return vim.NIL
end

return M
