"""The wrapper table of :mod:`.commands`: programs that run another program named in their arguments.

Each entry is the wrapper's option grammar; :mod:`.commands` skips the options to find the wrapped
command and judges it. An option not listed makes the command unparseable (it might consume the
program as its value), so the grammar fails closed. The programs whose *options* run code (git's
``-c core.pager``, ``python3 -c``…) are the other table, :mod:`.code_options`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shell import Unparseable, Word

ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")


@dataclass(frozen=True)
class Opts:
    """A wrapper's option grammar; anything else is unparseable (it might consume the program)."""

    flags: str = ""  # short options without a value
    valued: str = ""  # short options with a value (attached or the next word)
    optional: str = ""  # short options with an optional attached value
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    operands: int = 0  # operands before the program (timeout's DURATION)
    assignments: bool = False  # NAME=value words before the program
    numeric: bool = False  # `-N` (nice)
    taint: str | None = None
    default: tuple[str, ...] = ()  # what runs when no program is named
    joins: bool = False  # the words are also joined into one shell line and parsed again (watch)
    command_opt: bool = False  # `-c CMD` / `--command=CMD` anywhere is a shell string (su, flock)
    opaque: bool = False  # without -c, do not unwrap (`su root` names a user, not a program)
    long_optional: frozenset[str] = frozenset()  # long options whose value is only ever attached (--nofile=N)
    until: frozenset[str] = frozenset()  # the wrapped command ends before this word (parallel's :::)
    stdin_shell: bool = False  # with no program it starts a shell reading commands from stdin


def _fs(*names: str) -> frozenset[str]:
    return frozenset(names)


WRAPPERS: dict[str, Opts] = {
    "env": Opts("i0v-", "uC", long_flags=_fs("ignore-environment", "null", "debug", "block-signal",
                 "default-signal", "ignore-signal", "list-signal-handling"),
                 long_valued=_fs("unset", "chdir"), assignments=True),  # -S is not parsed: unparseable
    "sudo": Opts("AbEHiknPSsVB", "ughpCDrtTUR", long_flags=_fs("askpass", "background", "preserve-env", "set-home",
                  "login", "non-interactive", "preserve-groups", "stdin", "shell", "bell", "reset-timestamp"),
                  long_valued=_fs("user", "group", "host", "prompt", "close-from", "chdir", "role", "type",
                                  "command-timeout", "other-user", "chroot"), assignments=True, taint="privilege",
                 stdin_shell=True),
    "doas": Opts("ns", "uC", taint="privilege", stdin_shell=True),
    "xargs": Opts("0rtpxo", "adEILnPs", "eil", _fs("null", "no-run-if-empty", "verbose", "interactive", "exit",
                   "open-tty", "max-lines", "replace", "eof"),
                   _fs("arg-file", "delimiter", "max-args", "max-procs", "max-chars", "process-slot-var"),
                   taint="xargs", default=("echo",)),
    "nohup": Opts(),
    "time": Opts("pvqa", "fo", long_flags=_fs("portability", "verbose", "quiet", "append"),
                  long_valued=_fs("format", "output")),
    "nice": Opts("", "n", long_valued=_fs("adjustment"), numeric=True),
    "timeout": Opts("v", "ks", long_flags=_fs("preserve-status", "foreground", "verbose"),
                     long_valued=_fs("kill-after", "signal"), operands=1),
    "exec": Opts("cl", "a"),
    "command": Opts("pvV"),
    "builtin": Opts(),
    "stdbuf": Opts("", "ioe", long_valued=_fs("input", "output", "error")),
    "setsid": Opts("cfw", long_flags=_fs("ctty", "fork", "wait")),
    "busybox": Opts(),
    "ionice": Opts("t", "cnpPu", long_flags=_fs("ignore"),
                    long_valued=_fs("class", "classdata", "pid", "pgid", "uid")),
    "taskset": Opts("ac", long_flags=_fs("all-tasks", "cpu-list"), operands=1),
    "chroot": Opts(long_flags=_fs("skip-chdir"), long_valued=_fs("userspec", "groups"), operands=1, taint="privilege",
                   stdin_shell=True),
    "flock": Opts("sxnuoFv", "wE", long_flags=_fs("shared", "exclusive", "nonblock", "unlock", "close", "verbose"),
                   long_valued=_fs("timeout", "conflict-exit-code"), operands=1, command_opt=True),
    "watch": Opts("bcCegptwx", "n", "d", _fs("beep", "color", "no-color", "errexit", "chgexit", "precise", "no-title",
                   "no-wrap", "exec", "differences"), _fs("interval"), joins=True),
    "su": Opts("lmpfP-", "sgGw", long_valued=_fs("shell", "group", "supp-group", "whitelist-environment"),
                taint="privilege", command_opt=True, opaque=True, stdin_shell=True),  # `su root`: a user, not a program
    "runuser": Opts("lmpfP-", "ugGsw", long_flags=_fs("login", "preserve-environment", "pty"),
                     long_valued=_fs("user", "group", "supp-group", "shell", "whitelist-environment"),
                     taint="privilege", command_opt=True, stdin_shell=True),
    # programs that only run another program (issue 12): judge the inner command
    "strace": Opts("fFcCqtTvVxyzZkwDrin", "abeEIoOpPsSuUX", long_valued=_fs("output", "trace", "signal", "expr",
                   "status", "user", "attach"), long_flags=_fs("follow-forks", "summary-only", "quiet"), taint="trace"),
    "ltrace": Opts("bcCfhiLrStTV", "aeEFlnopsuxAD", long_valued=_fs("output", "library"), taint="trace"),
    "unshare": Opts("muinpUCTfrc", "RwSG", long_flags=_fs("fork", "kill-child", "map-root-user", "map-current-user",
                    "keep-caps", "map-auto", "user", "pid", "uts", "ipc", "net", "cgroup", "time", "mount-binfmt"),
                    long_valued=_fs("root", "wd", "setuid", "setgid", "propagation", "setgroups", "map-user",
                                    "map-group", "map-users", "map-groups"),
                    long_optional=_fs("mount", "mount-proc", "user", "pid", "uts", "ipc", "net", "cgroup", "time",
                                      "kill-child", "map-root-user"),
                    taint="privilege", stdin_shell=True),
    "prlimit": Opts("", "p", "cdefilmnqrstuvxy", long_flags=_fs("noheadings", "raw", "verbose"),
                    long_valued=_fs("pid", "output"),
                    long_optional=_fs("as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice",
                                      "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"),
                    taint="limits"),
    "parallel": Opts("kqvXm", "jnNIaSd", long_flags=_fs("keep-order", "dry-run", "bar", "progress", "verbose",
                     "line-buffer", "group", "ungroup", "null", "tag", "halt-on-error"),
                     long_valued=_fs("jobs", "max-args", "colsep", "arg-file", "halt", "delay", "timeout",
                                     "sshlogin", "workdir", "results", "joblog", "tmpdir"),
                     taint="xargs", joins=True, until=_fs(":::", "::::", ":::+", "::::+"), stdin_shell=True),
    "ssh": Opts("46AaCfGgKkMNnqsTtVvXxYy", "BbcDEeFIiJLlmOopQRSWw", operands=1, taint="remote", joins=True,
                stdin_shell=True),
    "systemd-run": Opts("rqtPSdGh", "upEHM", long_flags=_fs("user", "system", "scope", "remain-after-exit",
                        "no-block", "wait", "collect", "quiet", "pty", "pipe", "shell", "same-dir",
                        "no-ask-password"),
                        long_valued=_fs("unit", "property", "description", "slice", "uid", "gid", "nice", "setenv",
                                        "working-directory", "host", "machine", "on-active", "on-boot", "on-startup",
                                        "on-unit-active", "on-unit-inactive", "on-calendar", "timer-property",
                                        "path-property", "socket-property", "service-type", "send-sighup"),
                        taint="privilege", stdin_shell=True),
    "script": Opts("aeqfkF", "cEmOTIB", long_valued=_fs("command", "echo", "logging-format", "log-out",
                   "log-timing", "log-in", "log-io"), command_opt=True, opaque=True),
}


def _only(name: str, after: list[Word], found: Word) -> Word:
    """``found``, unless another ``-c``/``--command`` follows (the last one wins: `su -c ls -c 'rm x'`)."""
    if any(a.value in ("-c", "--command") or a.value.startswith("--command=")
           or (a.value.startswith("-") and not a.value.startswith("--") and "c" in a.value) for a in after):
        raise Unparseable(f"{name}: more than one command string")
    return found


def command_option(name: str, spec: Opts, args: list[Word]) -> Word | None:
    """The value of ``-c CMD`` / ``-lc CMD`` / ``--command[=]CMD`` among the options and first operand
    of ``args`` (``su root -c CMD``, ``flock FILE -c CMD``), if any. ``runuser -u`` runs a program."""
    i, operands = 0, 0
    while i < len(args) and operands < 2:
        w, v = args[i], args[i].value
        if w.dynamic:
            raise Unparseable(f"{name}: argument {v!r} is computed at run time")
        if v == "--":
            return None
        if v.startswith("--"):
            key, eq, value = v[2:].partition("=")
            if key == "command":
                if eq:
                    return _only(name, args[i + 1 :], Word(value, w.dynamic))
                if i + 1 >= len(args):
                    raise Unparseable(f"{name} --command without a command string")
                return _only(name, args[i + 2 :], args[i + 1])
            if name == "runuser" and key == "user":
                return None
            i += key in spec.long_valued and not eq
        elif v.startswith("-") and v != "-":
            for j, ch in enumerate(v[1:], 1):
                if ch not in spec.flags and ch not in spec.valued and ch != "c":
                    raise Unparseable(f"{name}: unknown option {v!r}")
                if ch == "u" and name == "runuser":
                    return None
                if ch == "c" and j < len(v) - 1:
                    return _only(name, args[i + 1 :], Word(v[j + 1 :], w.dynamic))
                if ch == "c":
                    if i + 1 >= len(args):
                        raise Unparseable(f"{name} -c without a command string")
                    return _only(name, args[i + 2 :], args[i + 1])
                if ch in spec.valued:
                    i += j == len(v) - 1
                    break
        else:
            operands += v != "-"
        i += 1
    return None


def strip(name: str, spec: Opts, args: list[Word]) -> tuple[list[Word], list[Word], bool]:
    """Split a wrapper's arguments into (its options, the wrapped command, assignments seen)."""
    i, operands, options, assigned, value_next = 0, spec.operands, True, False, False
    while i < len(args):
        w, v = args[i], args[i].value
        if w.dynamic:  # even as an option's value: `-u $EMPTY rm x` would run `x`
            raise Unparseable(f"{name}: argument {v!r} is computed at run time")
        if value_next:
            value_next = False
        elif options and v == "--":
            options = False
        elif options and spec.assignments and ASSIGN.match(v):
            assigned = True
        elif options and ((v == "-" and "-" in spec.flags) or (spec.numeric and re.fullmatch(r"-\d+", v))):
            pass
        elif options and v.startswith("--"):
            key, eq, _ = v[2:].partition("=")
            if key not in spec.long_valued | spec.long_flags | spec.long_optional:
                raise Unparseable(f"{name}: unknown option {v!r}")
            value_next = key in spec.long_valued and not eq and key not in spec.long_optional
        elif options and v.startswith("-") and len(v) > 1:
            for j, ch in enumerate(v[1:], 1):
                if ch in spec.optional:
                    break
                if ch in spec.valued:
                    value_next = j == len(v) - 1  # the value is the next word unless attached
                    break
                if ch not in spec.flags:
                    raise Unparseable(f"{name}: unknown option {v!r}")
        elif operands:
            operands -= 1
        else:
            break
        i += 1
    return args[:i], args[i:], assigned


__all__ = ["ASSIGN", "WRAPPERS", "Opts", "command_option", "strip"]
