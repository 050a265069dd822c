"""Every `novella` subcommand and option says what it is for (`--help`)."""
import argparse

from novella.cmd.main import build_parser
from novella.endpoints import CONSOLE_PROXIES, PORTS


def _walk(parser, path=("novella",)):
    """(path, subcommand parser or None, option) for every subcommand and option."""
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), sub, helps.get(name)
                yield from _walk(sub, path + (name,))
        else:
            yield path, None, action


def test_every_subcommand_and_option_has_help_text():
    missing = []
    for path, sub, what in _walk(build_parser()):
        if sub is not None:
            if not what:
                missing.append(" ".join(path) + ": no help")
            if not sub.description:
                missing.append(" ".join(path) + ": no description")
        elif not what.help:
            missing.append(f"{' '.join(path)} {'/'.join(what.option_strings) or what.dest}")
    assert missing == []


def test_the_walk_sees_the_whole_tree():
    paths = {" ".join(path) for path, sub, _ in _walk(build_parser()) if sub is not None}
    for command in ("novella up", "novella serve", "novella drain", "novella image build-guest",
                    "novella manage db archive_deleted_rows", "novella manage cell_v2 update_cell",
                    "novella manage placement heal_allocations", "novella manage bootstrap"):
        assert command in paths


def test_serve_help_lists_each_services_default_port():
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    text = serve.format_help()
    lines = {line.split()[0]: line for line in text.splitlines()
             if line.startswith("  ") and line.split()}
    wanted = {"api": "compute", "placement": "placement", "image": "image",
              "network": "network", "volume": "volume", "optimize": "optimize"}
    ports = {name: port for name, _offset, port in PORTS}
    for service, api in wanted.items():
        assert f"port {ports[api]}" in lines[service], lines.get(service)
    for service, _offset, port in CONSOLE_PROXIES:
        assert f"port {port}" in lines[service], lines.get(service)
    # The services on the message bus listen on no port.
    for service in ("conductor", "scheduler", "compute"):
        assert "port" not in lines[service].split()[1], lines[service]
        assert lines[service].split()[1] == "RabbitMQ", lines[service]
