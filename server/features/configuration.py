"""Settings: ``initializationOptions``, ``workspace/configuration`` (section ``kernelsight``,
re-read on ``workspace/didChangeConfiguration``) and ``[tool.kernelsight]`` in pyproject.toml
(resolved per document by the session)."""
from __future__ import annotations

import asyncio
import logging
import threading

from lsprotocol import types as t

log = logging.getLogger("kernelsight.server")

SECTION = "kernelsight"


def _section(raw) -> dict:
    """Accept either ``{"kernelsight": {...}}`` or the section's content itself."""
    if isinstance(raw, dict):
        inner = raw.get(SECTION)
        return inner if isinstance(inner, dict) else raw
    return {}


async def pull_configuration(ls) -> None:
    """Ask the client for the ``kernelsight`` section (when it supports the request)."""
    if not ls.client_supports("workspace.configuration"):
        return
    # No timeout: cancelling the request's future would make pygls fail on the late answer,
    # and a client busy with a burst of edits may answer after seconds.
    try:
        result = await ls.workspace_configuration_async(
            t.ConfigurationParams(items=[t.ConfigurationItem(section=SECTION)]))
    except Exception as exc:  # a client that fails the request keeps the previous settings
        log.warning("workspace/configuration failed: %s", exc)
        return
    value = result[0] if result else None
    ls.session.client_settings = value if isinstance(value, dict) else {}
    ls.session.settings_changed()


def reanalyse_all(ls) -> None:
    for state in list(ls.session.docs.values()):
        if state.ignored:
            continue
        asyncio.ensure_future(ls.analyzer.run(state.uri, "fast"))
        asyncio.ensure_future(ls.analyzer.run(state.uri, "full"))


def register(ls) -> None:
    @ls.feature(t.INITIALIZE)
    def initialize(ls, params: t.InitializeParams):
        ls._loop = asyncio.get_event_loop()
        ls.loop_thread = threading.get_ident()
        ls.session.init_options = _section(params.initialization_options)
        ls.session.settings_changed()
        ls.drop_pull_provider_unless_pulled()
        from .. import startup

        # Runs once this handler has returned and pygls has written the answer.
        ls._loop.call_soon(startup.resume_gc)

    @ls.feature(t.INITIALIZED)
    async def initialized(ls, params: t.InitializedParams):
        from .. import startup

        startup.save()  # the code compiled for this start, initialize's included
        startup.release()
        log.info("kernelsight %s ready (%s diagnostics, position encoding %s)", ls.version,
                 "push" if ls.push_mode else "pull",
                 getattr(ls.workspace.position_encoding, "value", ls.workspace.position_encoding))
        await pull_configuration(ls)
        if ls.session.client_settings:
            reanalyse_all(ls)
        ls.flush_setting_errors()

    @ls.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls, params: t.DidChangeConfigurationParams):
        if ls.client_supports("workspace.configuration"):
            await pull_configuration(ls)
        else:
            ls.session.client_settings = _section(params.settings)
            ls.session.settings_changed()
        ls.flush_setting_errors()
        log.info("settings changed; re-analysing %d open documents", len(ls.session.docs))
        reanalyse_all(ls)
