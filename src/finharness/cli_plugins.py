"""The commands of `finharness` beyond cli.py's own, as plug-ins mounted when they are named.

cli.py defines run, score, list, compare, report and demo. Every other command comes through plugins.py's
door, like tasks and backends: the built-in tables (COMMANDS below for the harness's own groups,
the benchmarks' declarations, benchmarks/*/__init__.py) and the entry-point group `finharness.commands` of installed
distributions. A name is the command's path joined by dots (`ucfe`, `data.convert.ideafinbench`); its value
`module:attr` names a typer.Typer (a command group) or a function (one command, typer-annotated, its
docstring the help). A dotted name mounts into the group its prefix names: the longest prefix that is a
plug-in, then the groups inside it (`data.convert.ideafinbench` goes into `finharness data convert`, the
`convert` group of the `data` plug-in).

Nothing is imported before it is needed: `finharness run` imports no plug-in and reads no entry point;
`finharness --help` imports each top-level group to list it; running a group imports it and what mounts
into it. A built-in name wins over an entry point of the same name. An entry point that cannot be loaded
is listed with its error and fails when run; a built-in that cannot be loaded is a bug, raised as it is.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from .plugins import BUILT_IN, COMMAND_GROUP, Plugin, PluginError, catalogue

COMMANDS: dict[str, str] = {
    "batch": "finharness.backends.cli_batch:batch_app",
    "contamination": "finharness.commands.contamination:contamination_command",
    "data": "finharness.commands.data:data_app",
    "markets": "finharness.markets.cli:markets_app",
    "plan": "finharness.commands.plan:plan_command",
    "rate": "finharness.rating.cli:rate_command",
    "retrieve": "finharness.retrieval.cli:retrieve_command",
    "ui": "finharness.ui.cli:ui_app",
    "doctor": "finharness.doctor:doctor",
}
"""The harness's own command groups (the benchmarks' are in their declarations, benchmarks/declaration.py)."""


def built_in_commands() -> dict[str, str]:
    """The harness's own commands and those the built-in benchmarks declare (benchmarks/*/__init__.py)."""
    from .benchmarks.declaration import built_in_commands as benchmark_commands

    return {**COMMANDS, **benchmark_commands()}


def command_plugins() -> dict[str, Plugin | PluginError]:
    """Every usable command plug-in by dotted name; a name several distributions give is its PluginError."""
    found: dict[str, Plugin | PluginError] = {}
    from .benchmarks.declaration import installed_plugins

    for plugin, unused in catalogue(built_in_commands(), COMMAND_GROUP, installed_plugins("commands")):
        if unused is None:
            found[plugin.name] = plugin
        elif plugin.name not in found:  # ambiguous: every distribution giving the name is a candidate
            found[plugin.name] = PluginError(f"command {plugin.name.replace('.', ' ')!r}: several installed "
                                             f"distributions give it under entry-point group {COMMAND_GROUP!r}; "
                                             "uninstall all but one")
    return found


def as_command(name: str, obj: Any, where: str) -> Any:
    """The click command of a plug-in's object: a typer.Typer becomes a group, a function one command."""
    if isinstance(obj, typer.Typer):
        command = typer.main.get_group(obj)
    elif callable(obj):
        single = typer.Typer(add_completion=False, rich_markup_mode=None)  # as the root's own commands
        single.command(name=name)(obj)
        command = typer.main.get_command(single)
    else:
        raise PluginError(f"command {name!r} ({where}) is a {type(obj).__name__}, neither a typer.Typer nor a "
                          "function")
    command.name = name
    return command


def broken_command(name: str, error: PluginError) -> Any:
    """A command standing for a plug-in that cannot be loaded: listed with its error, failing when run."""
    from .cli_common import fail

    def broken() -> None:
        fail(str(error))

    broken.__doc__ = f"(cannot be loaded: {error})"
    return as_command(name, broken, "")


def owner(path: str, plugins: dict[str, Plugin | PluginError]) -> str | None:
    """The plug-in `path` mounts into: the longest dotted prefix of it that is a plug-in (None: the root)."""
    parts = path.split(".")
    return next((".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in plugins), None)


def load_command(path: str, plugins: dict[str, Plugin | PluginError]) -> Any:
    """The command of plug-in `path`, with every plug-in that mounts into it added (a group's sub-commands)."""
    name = path.rpartition(".")[2]
    plugin = plugins[path]
    if isinstance(plugin, PluginError):
        return broken_command(name, plugin)
    try:
        command = as_command(name, plugin.load(), str(plugin.source))
    except PluginError as err:
        if plugin.source == BUILT_IN:
            raise
        return broken_command(name, err)
    for child in sorted(p for p in plugins if owner(p, plugins) == path):
        try:
            mount(command, child[len(path) + 1:].split("."), load_command(child, plugins), child)
        except PluginError as err:  # another distribution's mistake must not take the group down
            found = plugins[child]
            if isinstance(found, Plugin) and found.source == BUILT_IN:
                raise
            typer.secho(f"warning: {err}", fg="yellow", err=True)
    return command


def mount(group: Any, parts: list[str], command: Any, path: str) -> None:
    """Add `command` as `parts[-1]` to the group of `group` that `parts[:-1]` name (`convert`, `x` under
    `data`: the `convert` group of `data`); a missing group is a PluginError naming plug-in `path`."""
    for part in parts[:-1]:
        inner = getattr(group, "commands", {}).get(part)
        if inner is None:
            raise PluginError(f"command plug-in {path!r}: `{group.name}` has no group {part!r} to mount it in")
        group = inner
    if not hasattr(group, "add_command"):
        raise PluginError(f"command plug-in {path!r}: `{group.name}` is a command, not a group")
    group.add_command(command, parts[-1])


class PluginGroup(TyperGroup):
    """The root group: cli.py's own commands, then the top-level command plug-ins, each loaded when named.

    Every command runs with its stdout and stderr redacted (no API key printed: finharness/redact.py), and an
    error the user can fix (cli_common.user_error_message: bad data, an unusable store, no space, no permission)
    ends as an `error:` line with exit status 2 instead of a traceback."""

    _plugins: dict[str, Plugin | PluginError] | None = None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        import sys

        from . import cli_common
        from .redact import redacting_streams

        given = kwargs.get("args", args[0] if args else None)
        cli_common.INVOKED_ARGS[:] = list(sys.argv[1:] if given is None else given)  # the command that resumes
        with redacting_streams():
            return super().main(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        from .cli_common import fail, user_error_message

        try:
            return super().invoke(ctx)
        except (ValueError, OSError) as err:  # DataError is a ValueError
            message = user_error_message(err)
            if message is None:
                raise
            fail(message)

    def plugins(self) -> dict[str, Plugin | PluginError]:
        if self._plugins is None:
            self._plugins = command_plugins()
        return self._plugins

    def list_commands(self, ctx: Any) -> list[str]:
        own = super().list_commands(ctx)
        return own + sorted(p for p in self.plugins() if "." not in p and p not in own)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        plugins = self.plugins()
        if cmd_name not in plugins or "." in cmd_name:
            return None
        self.commands[cmd_name] = load_command(cmd_name, plugins)
        return self.commands[cmd_name]


def plugin_app(**settings: Any) -> typer.Typer:
    """The root typer app, its group a PluginGroup."""
    return typer.Typer(cls=PluginGroup, **settings)

