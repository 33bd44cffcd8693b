-- Kernelsight language server configuration for Neovim >= 0.11.
-- With editors/nvim on 'runtimepath', `vim.lsp.enable('kernelsight')` starts the server for
-- Python buffers inside a project (pyproject.toml or .git). Override any field with
-- vim.lsp.config('kernelsight', {...}) or require('kernelsight').setup{...}.
local server = require('kernelsight.server')

local settings = server.settings()

---@type vim.lsp.Config
return {
  cmd = server.cmd(),
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', '.git' },
  -- Answers workspace/configuration for the section `kernelsight`.
  settings = { kernelsight = settings },
  init_options = { kernelsight = settings },
  -- Merged into Neovim's default capabilities: the refresh requests are handled below (see
  -- lua/kernelsight/pull.lua for why).
  capabilities = {
    workspace = { diagnostics = { refreshSupport = true }, codeLens = { refreshSupport = true } },
  },
  handlers = {
    ['workspace/diagnostic/refresh'] = require('kernelsight.pull').on_refresh,
    ['workspace/codeLens/refresh'] = require('kernelsight.pull').on_codelens_refresh,
  },
}
