"""The files the ``polygemm`` commands write (``--json``, ``--markdown``, ``--plot``,
``-o/--output``): checked before a command runs, so that no result is lost at its end to a
missing folder or a typo, and written whole or not at all."""

from __future__ import annotations

import argparse
import json
import os
import stat
import tempfile
from typing import Any, Callable

from ..errors import ArgumentError

__all__ = ["OUTPUT_OPTIONS", "IMAGE_OPTIONS", "JSON_STDOUT", "image_format", "cannot_create_in", "special_file",
           "unwritable", "write_file", "json_to_stdout", "add_json_option", "emit_json", "WriteFailed"]

#: the options that name a file a command writes when it is done
OUTPUT_OPTIONS = ("json", "markdown", "plot", "output")
#: an example file name's extension for each of them (the empty-path error suggests one)
_EXAMPLE_EXT = {"json": "json", "markdown": "md", "plot": "png", "output": "png"}
#: the options among them that name an image (matplotlib picks its format by the extension)
IMAGE_OPTIONS = ("plot", "output")
#: what ``--json`` with no path (or ``--json -``) stands for in the commands that print JSON: standard output
JSON_STDOUT = "-"


def image_format(path: str) -> str:
    """The format matplotlib writes ``path`` in: its extension (``.png``, ``.svg``, ``.pdf``, ...),
    PNG where it has none. Raises ArgumentError naming the formats matplotlib writes when it
    cannot write that one (matplotlib must be importable; the callers check that first)."""
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if not ext:
        return "png"
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    if ext not in kinds:
        raise ArgumentError(f"{path}: matplotlib cannot write '.{ext}' files; name a file ending in "
                            f"{', '.join('.' + k for k in sorted(kinds))} (.png is the usual one)")
    return ext


def cannot_create_in(folder: str) -> str | None:
    """None when a file can be made in ``folder``, else the system's reason. Tried by making (and
    removing) an empty file: ``os.access`` answers yes to root for /proc, /sys or a folder on a
    mount that refuses new files, and a command would then run to its end (a whole benchmark,
    the whole kernel catalog) before failing to write its results."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".polygemm-probe.", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def special_file(path: str) -> bool:
    """Whether ``path`` names an existing target that is no regular file nor folder (``/dev/null``, ``/dev/stdout``'s
    pipe, a FIFO): output is written into it, never put in its place."""
    try:
        mode = os.stat(path).st_mode  # through links, as open() goes
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def unwritable(args: argparse.Namespace) -> str | None:
    """Why an output file the command will write at its end cannot be written (None: all can
    be), checked before the command runs: a benchmark's results are not lost at the end to a
    missing folder or a typo."""
    taken: dict[str, str] = {}
    for option in OUTPUT_OPTIONS:
        path = getattr(args, option, None)
        if isinstance(path, str) and not path.strip():
            # "--json $OUT" with OUT unset: said before the run, not found missing after it
            return f"--{option} {path!r}: an empty path; name a file (e.g. --{option} results.{_EXAMPLE_EXT[option]})"
        if not isinstance(path, str):
            continue
        if path.strip() == JSON_STDOUT and option == "json" and getattr(args, "json_stdout_ok", False):
            continue  # info, variants, explain: their JSON on standard output, in place of the text
        if path.strip() == "-":
            # other tools' "standard output": these files are written whole at the end, beside the human-readable
            # lines on stdout, so a pipe reading stdout could not tell them apart
            return (f"--{option} -: polygemm writes --{option} to a file, not to standard output; name a file (e.g. "
                    f"--{option} results.{_EXAMPLE_EXT[option]}, then read it), or ./- for a file named '-'")
        same = taken.get(os.path.realpath(path))
        if same is not None:  # the later file would silently replace the earlier one
            return f"--{option} {path}: --{same} writes that file too; give each output its own file"
        taken[os.path.realpath(path)] = option
        if special_file(path):  # written into, not replaced (write_file)
            if not os.access(path, os.W_OK):
                return f"--{option} {path}: not writable"
            continue
        # the folder the file will be made in: a link's target's
        folder = os.path.dirname(os.path.realpath(path))
        if not os.path.isdir(folder):
            there = folder  # the nearest part of the path that exists: a file where a folder is meant, or none
            while not os.path.lexists(there) and os.path.dirname(there) != there:
                there = os.path.dirname(there)
            if os.path.lexists(there) and not os.path.isdir(there):
                return f"--{option} {path}: {there} is a file, not a folder; name a file in a folder"
            return f"--{option} {path}: the folder {folder} does not exist"
        if os.path.isdir(path) or path.endswith(("/", os.sep)):  # (a path ending in a slash names a folder, made or not)
            return f"--{option} {path}: that is a folder; name a file"
        if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
            return f"--{option} {path}: not writable"
        why = cannot_create_in(folder)  # what os.access lets through (root, /proc)
        if why is not None:
            return f"--{option} {path}: no file can be made in {folder} ({why}); name a file in a folder you can write"
        if option in IMAGE_OPTIONS:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                continue  # the command says what it needs
            try:
                image_format(path)
            except ArgumentError as exc:
                return f"--{option} {exc}"
    return None


def _read_umask() -> int:
    """The process's umask (read once, at import: reading it means setting it, which would race
    with other threads creating files if done per write)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


class WriteFailed(ArgumentError):
    """A file the command writes at its end could not be written (a full disk, a folder gone): the run itself
    failed, exit status 1, as a device error's (a path refused before the run is a usage error, 2)."""


def write_file(path: str, write: Callable[[Any], None], binary: bool = False) -> None:
    """Write ``path`` whole or not at all: ``write(fh)`` fills a temporary file beside it, which
    then replaces ``path`` (a failure or Ctrl-C while writing leaves the previous file as it
    was and no temporary behind). A target that exists and is no regular file (``/dev/null``,
    ``/dev/stdout``'s pipe, a FIFO) is written into: replacing it would turn ``/dev/null`` into a
    regular file for the whole machine. An OSError is an ArgumentError naming ``path``."""
    if special_file(path):
        try:
            with open(path, "wb" if binary else "w") as fh:
                write(fh)
        except OSError as exc:
            raise WriteFailed(f"could not write {path}: {exc.strerror or exc}") from None
        return
    shown = path
    path = os.path.realpath(path)  # through a symlink to the file it names (the link stays a link)
    folder = os.path.dirname(path)
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        mode = 0o666 & ~_UMASK
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".part", dir=folder)
    except OSError as exc:  # a folder gone since the check before the run (or a link to none)
        raise WriteFailed(f"could not write {shown}: {exc.strerror or exc} ({folder})") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def json_to_stdout(args: argparse.Namespace) -> bool:
    """True when ``--json`` was given no file (or ``-``) by a command that prints JSON: it goes to standard output."""
    path = getattr(args, "json", None)
    return isinstance(path, str) and path.strip() == JSON_STDOUT


def add_json_option(s: argparse.ArgumentParser, what: str) -> None:
    """``--json [PATH]`` of a command whose output is small: on standard output, or to a file beside the text."""
    s.add_argument("--json", nargs="?", const=JSON_STDOUT, metavar="PATH",
                   help=f"{what} as JSON: on standard output in place of the text (--json alone, or --json -), "
                        "or written to PATH beside the text")
    s.set_defaults(json_stdout_ok=True)


def write_json(path: str, payload: Any, allow_nan: bool = True) -> None:
    """``payload`` as indented JSON, ending in a newline, into ``path`` whole or not at all (:func:`write_file`)."""
    write_file(path, lambda fh: (json.dump(payload, fh, indent=1, allow_nan=allow_nan), fh.write("\n")))


def emit_json(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    """A command's output: ``text`` on stdout, or with ``--json`` the payload as JSON in its
    place; with ``--json PATH`` the text and the file (whole or not at all)."""
    if json_to_stdout(args):
        print(json.dumps(payload, indent=1, allow_nan=False))
        return
    print(text)
    if args.json:
        text_json = json.dumps(payload, indent=1, allow_nan=False) + "\n"
        write_file(args.json, lambda fh: fh.write(text_json))
        print(f"wrote {args.json}")
