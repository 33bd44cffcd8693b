-- Minimal Neovim config for tests/test_editor_nvim.py: only the Kernelsight plugin from this
-- checkout, the interpreter of the test run, and what lsp/kernelsight.lua provides.
local root = assert(vim.env.KS_REPO, 'KS_REPO is not set')
vim.opt.runtimepath:prepend(root .. '/editors/nvim')
vim.g.kernelsight_python = assert(vim.env.KS_PYTHON, 'KS_PYTHON is not set')
vim.opt.swapfile = false
vim.lsp.enable('kernelsight')
require('kernelsight').setup({})
