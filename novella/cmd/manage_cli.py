"""What every `novella manage` command shares: its error and exit codes, how it
is registered and run, the tables it prints and the URLs it masks."""
import datetime
import logging
import re

import sqlalchemy as sa

LOG = logging.getLogger(__name__)

# The exit code of a command whose configuration lacks what it needs (an option
# unset, a file missing): the reference's "unexpected error" code, which no
# command gives another meaning (1 means "run again" for archive_deleted_rows
# and heal_allocations, "not mapped" for verify_instance).
CONFIG_ERROR = 255


class CommandError(Exception):
    """A command cannot go on: its message is printed and it exits with ``code``."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def mask_url(url):
    """``url`` (a database or transport URL, several hosts too:
    ``rabbit://u:pw@h1,u:pw@h2/``) with each password replaced by ``****``, as the
    reference prints cells."""
    scheme, sep, rest = (url or "").partition("://")
    if not sep:
        return url
    hosts, slash, path = rest.partition("/")

    def one(host):
        creds, at, where = host.rpartition("@")
        if not at or ":" not in creds:
            return host
        return creds.split(":", 1)[0] + ":****@" + where
    return f"{scheme}://" + ",".join(one(h) for h in hosts.split(",")) + slash + path


def mask_url_in(text):
    """``text`` with the password of every URL in it masked."""
    return re.sub(r"\b[a-z][a-z0-9+.-]*://\S+", lambda m: mask_url(m.group(0)), text)


def table(headers, rows):
    """An ASCII table, as the reference's commands print them."""
    cells = [[str(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values):
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"
    return "\n".join([rule, line(headers), rule] + [line(r) for r in cells] + [rule])


_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S",
                 "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%d %H:%M:%S.%f",
                 "%a %b %d %H:%M:%S %Z %Y", "%a %b %d %H:%M:%S %Y", "%a %d %b %Y %H:%M:%S %Z",
                 "%b %d %Y", "%b %d %Y %H:%M", "%d %b %Y")


def parse_date(text):
    """A --before value: ``YYYY-MM-DD[ HH:MM[:SS]]``, ISO 8601, or what `date` prints.
    Raises ValueError."""
    value = " ".join(text.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.datetime.strptime(value, fmt)
        except ValueError:
            continue
    raise ValueError(f"unknown date format: {text!r}")


def require_api(api_url):
    if not api_url:
        raise CommandError("error: [api_database] connection is not set "
                           "(config file or --api-database-connection)", CONFIG_ERROR)
    return api_url


def command(subparsers, name, fn, help_text=None):
    """A sub-command whose ``fn(args, api_url)`` returns the exit code (None: 0);
    a CommandError prints its message and exits with its code."""
    def run(args, api_url):
        try:
            return fn(args, api_url)
        except CommandError as exc:
            print(exc)
            return exc.code
        except sa.exc.SQLAlchemyError as exc:  # a database unreachable or not as expected
            LOG.debug("%s failed", name, exc_info=True)
            print(f"An error has occurred: {type(exc).__name__}: "
                  f"{mask_url_in(str(getattr(exc, 'orig', None) or exc))}")
            return CONFIG_ERROR
    p = subparsers.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(run=run)
    return p
