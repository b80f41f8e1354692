"""Programs whose options or arguments run code or write files: one table, consulted for every form.

``allow:Bash(git *)`` was meant for ``git status``, not for ``git -c core.pager='rm -rf build' log``;
``allow:Bash(*)`` beside ``deny:Bash(rm *)`` was not meant to let ``find . -delete`` or
``GIT_PAGER='rm x' git log`` through. So every simple command is looked up here (after the
wrappers of :mod:`.commands` are unwrapped) and each finding says one of:

* ``command`` — the option's value is a shell command (``git rebase --exec``, ``tar --to-command``,
  ``core.pager``, ``GIT_PAGER``): it is parsed and judged like any other command (a deny of it
  bites), and the form carries a *code* mark;
* ``argv`` — the words after the option are a command (``git bisect run``); ``line`` — they are
  joined into a shell line (``git submodule foreach [--recursive] CMD…``);
* ``code`` / ``flag`` — the option runs code we cannot judge (``python3 -c``, ``git grep -O``,
  ``ssh -o ProxyCommand=…``): a code mark only;
* ``write`` — the option's value is a file the program writes (``sort -o``, ``git log --output``):
  a write request, judged by the path rules.

A code mark (see :mod:`.matching`) means only an allow that spells the program and the option
literally covers the form: ``Bash(git *)`` and ``Bash(*)`` do not, ``Bash(python3 -c *)`` does.
Deny and ask rules are unaffected. Programs not in the table, options not in it, and arguments
computed at run time are what the limits of the segmenter are (see :mod:`.commands`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal

from .shell import Word

Kind = Literal["command", "argv", "line", "code", "flag", "write"]


@dataclass(frozen=True)
class Program:
    """An option grammar good enough to find the options of :data:`TABLE` (not to validate)."""

    options: dict[str, Kind]  # "-c", "--eval", "-exec" (single-dash long), "-O" … → kind
    valued: str = ""  # other short options that take a value (skipped)
    long_valued: frozenset[str] = frozenset()  # other long options that take a value
    grouped: bool = True  # short options combine (-Bc): a letter anywhere in a group counts
    stop: str = ""  # after this short option (and its value) the rest belongs to someone else (python -m)
    stop_at_operand: bool = False  # options end at the first operand (interpreters: the rest is the script's)
    stdin_code: bool = False  # with no operand and no code option it runs code read from stdin (| python3)


def _fs(*names: str) -> frozenset[str]:
    return frozenset(names)


_PY = Program({"-c": "code"}, valued="WXQ", long_valued=_fs("--check-hash-based-pycs"), stop="m",
              stop_at_operand=True, stdin_code=True)
_PERL = Program({"-e": "code", "-E": "code"}, valued="", stop_at_operand=True, stdin_code=True)
_NODE = Program({"-e": "code", "--eval": "code", "-p": "code", "--print": "code"},
                valued="r", long_valued=_fs("--require", "--import", "--input-type", "--loader"),
                stop_at_operand=True, stdin_code=True)
_VIM = Program({"-c": "code", "--cmd": "code", "-S": "code", "-s": "code", "-W": "write", "-w": "write"},
               grouped=False)
_SSH_LIKE = Program({"-F": "code", "-S": "code"}, valued="BbcDEeIiJLlmpQRWw", grouped=True)

# program (or "git <subcommand>") -> its grammar. Interpreters first, then everything else.
TABLE: dict[str, Program] = {
    **{name: _PY for name in ("python", "python2", "python3", "pypy", "pypy3")},
    **{name: _PERL for name in ("perl", "ruby", "lua", "luajit")},
    **{name: _NODE for name in ("node", "nodejs", "bun")},
    "php": Program({"-r": "code"}, valued="cdzf", stop_at_operand=True, stdin_code=True),
    "Rscript": Program({"-e": "code"}, stop_at_operand=True),
    "osascript": Program({"-e": "code"}, stop_at_operand=True, stdin_code=True),
    "expect": Program({"-c": "code"}, stop_at_operand=True, stdin_code=True),
    "tclsh": Program({}, stop_at_operand=True, stdin_code=True),
    "deno": Program({"eval": "code"}, grouped=False),
    **{name: _VIM for name in ("vim", "vi", "nvim", "view", "ex", "gvim")},
    "emacs": Program({"--eval": "code", "-l": "code", "--load": "code", "-f": "code", "--funcall": "code",
                      "-x": "code", "--script": "code"}, grouped=False),
    "gdb": Program({"-ex": "code", "--ex": "code", "-x": "code", "--command": "code", "-eval-command": "code",
                    "--eval-command": "code", "-iex": "code", "-ix": "code"}, grouped=False),
    "lldb": Program({"-o": "code", "--one-line": "code", "-s": "code", "--source": "code"}, grouped=False),
    "make": Program({"--eval": "code", "-E": "code"}, valued="CfIjloW"),
    "find": Program({"-delete": "flag", "-fprint": "write", "-fprint0": "write", "-fls": "write",
                     "-fprintf": "write"}, grouped=False),
    "sort": Program({"-o": "write", "--output": "write", "--compress-program": "code"}, valued="kSTt",
                    long_valued=_fs("--key", "--buffer-size", "--temporary-directory", "--field-separator")),
    "tar": Program({"--to-command": "command", "-I": "command", "--use-compress-program": "command",
                    "--checkpoint-action": "code", "-F": "code", "--info-script": "code",
                    "--new-volume-script": "code", "--rsh-command": "command"}, valued="fCTXbHKLNgV"),
    "rsync": Program({"-e": "command", "--rsh": "command", "--rsync-path": "command"}, valued="fB",
                     long_valued=_fs("--filter", "--exclude", "--include", "--chmod", "--log-file")),
    "split": Program({"--filter": "command"}, valued="abdlnCt"),
    "man": Program({"-P": "command", "--pager": "command", "-H": "code", "--html": "code"}, valued="MmLSsCR"),
    "zip": Program({"-TT": "code", "--unzip-command": "code"}, grouped=False),
    "wget": Program({"-O": "write", "--output-document": "write", "-o": "write", "--output-file": "write",
                     "-a": "write", "--append-output": "write", "--use-askpass": "code"}, valued="tTPUeiBdwQ"),
    "curl": Program({"-o": "write", "--output": "write", "-D": "write", "--dump-header": "write",
                     "-c": "write", "--cookie-jar": "write", "--trace": "write", "--trace-ascii": "write",
                     "--stderr": "write", "-K": "code", "--config": "code"}, valued="HdXuAeErmbFTxwUQ",
                    long_valued=_fs("--header", "--data", "--request", "--user", "--user-agent", "--url",
                                    "--max-time", "--connect-timeout", "--form", "--cookie", "--proxy")),
    "time": Program({"-o": "write", "--output": "write"}, valued="f", stop_at_operand=True),
    "strace": Program({"-o": "write", "--output": "write"}, valued="abeEIOpPsSuUX", stop_at_operand=True),
    "ltrace": Program({"-o": "write", "--output": "write"}, valued="aeEFlnpsuxAD", stop_at_operand=True),
    "script": Program({"-O": "write", "--log-out": "write", "-T": "write", "--log-timing": "write",
                       "-I": "write", "--log-in": "write", "-B": "write", "--log-io": "write"}, valued="cEm"),
    "ssh": _SSH_LIKE,
    "scp": Program({"-F": "code", "-S": "code"}, valued="cDiJloPX"),
    "sftp": Program({"-F": "code", "-S": "code", "-D": "code"}, valued="BbciJloPRs"),
    "sudo": Program({}, valued="ughpCDrtTUR", stdin_code=False),
    # git: the subcommands whose options run programs (the global -c and `git config` are special-cased)
    "git rebase": Program({"--exec": "command", "-x": "command"}, valued="sX",
                          long_valued=_fs("--onto", "--strategy", "--strategy-option")),
    "git bisect": Program({"run": "argv"}, grouped=False),
    "git submodule": Program({"foreach": "line"}, grouped=False),
    **{f"git {sub}": Program({"--upload-pack": "command", "-u": "command", "--template": "code",
                              "--receive-pack": "command", "--exec": "command"}, valued="obj")
       for sub in ("ls-remote", "fetch", "pull", "clone", "push", "archive", "remote")},
    "git grep": Program({"-O": "flag", "--open-files-in-pager": "flag"}, valued="efABCm"),
    "git difftool": Program({"-x": "command", "--extcmd": "command", "-t": "code", "--tool": "code"}),
    "git mergetool": Program({"-t": "code", "--tool": "code"}),
    "git send-email": Program({"--sendmail-cmd": "command", "--smtp-server": "code", "--to-cmd": "command",
                               "--cc-cmd": "command", "--header-cmd": "command"}),
    "git init": Program({"--template": "code", "--separate-git-dir": "code"}),
    "git help": Program({"-w": "flag", "--web": "flag", "-m": "flag", "--man": "flag", "-i": "flag", "--info": "flag"}),
    **{f"git {sub}": Program({"--output": "write"}, valued="ISG")
       for sub in ("log", "diff", "show", "whatchanged", "range-diff", "diff-tree", "diff-index", "diff-files")},
    "git format-patch": Program({"-o": "write", "--output-directory": "write", "--output": "write"}, valued="v"),
}

# git subcommands that are code from end to end (every filter is a shell string)
GIT_ALWAYS_CODE = frozenset({"filter-branch", "instaweb", "fsmonitor--daemon"})
# programs that run commands in a way the segmenter does not parse: always a code mark
ALWAYS_CODE = frozenset({"bwrap", "firejail", "proot", "fakechroot", "capsh", "tmux", "screen", "at", "batch",
                         "crontab", "dtach", "pkexec", "sg", "newgrp", "machinectl", "schroot", "nsenter", "setpriv",
                         "chrt", "valgrind", "perf", "xvfb-run", "dbus-run-session", "ssh-agent", "unbuffer",
                         "entr", "nodemon", "faketime", "torsocks", "proxychains", "proxychains4", "runcon",
                         "catchsegv", "sandbox", "jshell", "irb", "ipython", "pdb"})
# `docker run`-like subcommands run a command in another environment the rules do not see
SUBCOMMAND_CODE = {"docker": frozenset({"run", "exec", "create"}), "podman": frozenset({"run", "exec", "create"}),
                   "kubectl": frozenset({"exec", "run", "debug"}), "ip": frozenset({"netns"})}

# -c KEY=VALUE of git: keys known not to run anything; any other key asks. Of those, the ones whose
# value is a command are parsed so a deny of that command still bites.
GIT_SAFE_KEYS = ("color.*", "advice.*", "user.name", "user.email", "core.quotepath", "core.abbrev",
                 "init.defaultbranch", "log.date", "log.decorate", "diff.renames", "diff.algorithm",
                 "merge.conflictstyle", "pull.rebase", "pull.ff", "push.default", "fetch.prune", "column.*",
                 "core.autocrlf", "core.safecrlf", "i18n.*", "format.pretty", "status.*", "branch.sort")
GIT_COMMAND_KEYS = ("core.pager", "core.editor", "core.sshcommand", "core.fsmonitor", "core.askpass",
                    "core.gitproxy", "diff.external", "diff.*.command", "diff.*.textconv", "merge.*.driver",
                    "filter.*.clean", "filter.*.smudge", "filter.*.process", "pager.*", "sequence.editor",
                    "credential.helper", "credential.*.helper", "gpg.program", "gpg.*.program",
                    "uploadpack.packobjectshook", "remote.*.uploadpack", "remote.*.receivepack",
                    "difftool.*.cmd", "mergetool.*.cmd", "man.*.cmd", "browser.*.cmd", "web.browser",
                    "alias.*", "sendemail.sendmailcmd", "receive.procreceive*", "core.hookspath")
GIT_GLOBAL_VALUED = _fs("-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds",
                        "--attr-source")
GIT_GLOBAL_FLAGS = _fs("-p", "--paginate", "-P", "--no-pager", "--bare", "--no-replace-objects", "--literal-pathspecs",
                       "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks",
                       "--no-lazy-fetch", "--no-advice", "-v", "--version", "-h", "--help", "--html-path",
                       "--man-path", "--info-path")
GIT_CONFIG_READS = _fs("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color",
                       "--get-colorbool", "get", "list", "--show-origin", "--show-scope", "--name-only", "-z",
                       "--null", "--global", "--system", "--local", "--worktree", "--includes", "--no-includes",
                       "--type", "--bool", "--int", "--path", "--default")

# environment assignments that name a program, a library, a config or a startup file: ask
CODE_ENV = ("*PAGER", "*EDITOR", "*_COMMAND", "*_ASKPASS", "GIT_*", "LD_*", "DYLD_*", "PYTHON*", "PERL5*", "PERLLIB",
            "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "PAGER",
            "EDITOR", "VISUAL", "BROWSER", "SHELL", "BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4", "PATH", "HOME",
            "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "ZDOTDIR", "SHELLOPTS", "BASHOPTS", "BASH_FUNC_*", "IFS",
            "LESSOPEN", "LESSCLOSE", "GCONV_PATH", "SSH_ASKPASS*", "CARGO_*_RUNNER", "RUSTC_WRAPPER",
            "MAKEFLAGS", "GNUMAKEFLAGS")
SAFE_ENV = ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
            "GIT_COMMITTER_DATE", "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "PYTHONUNBUFFERED",
            "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8")
COMMAND_ENV = ("*PAGER", "*EDITOR", "*_COMMAND", "VISUAL", "PROMPT_COMMAND", "GIT_SSH",
               "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "BROWSER")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"})


@dataclass
class Finding:
    """What a form does beyond its program: code to judge, a code mark, files written."""

    code: int | None = None  # the argv index (program = 0) an allow must spell through
    why: str | None = None
    commands: list[Word] = field(default_factory=list)  # shell strings it will run
    argvs: list[list[Word]] = field(default_factory=list)  # argv commands it will run
    writes: list[str | None] = field(default_factory=list)  # files written (None: named at run time)
    synthetic: list[tuple[str, ...]] = field(default_factory=list)  # what it amounts to (find -delete → rm)

    def mark(self, index: int, why: str) -> None:
        if self.code is None or index > self.code:
            self.code = index
        self.why = self.why or why


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def code_env(assignment: str) -> bool:
    """True when ``NAME=value`` names something that runs code (``GIT_PAGER=…``, ``LD_PRELOAD=…``)."""
    name = assignment.split("=", 1)[0].split("[", 1)[0].rstrip("+")
    return _matches(name, CODE_ENV) and not _matches(name, SAFE_ENV)


def env_command(assignment: str) -> str | None:
    """The command an assignment names (``GIT_PAGER=less -R`` → ``less -R``), when it holds one."""
    name, _, value = assignment.partition("=")
    return value if _matches(name.rstrip("+"), COMMAND_ENV) and value.strip() else None


__all__ = ["ALWAYS_CODE", "CODE_ENV", "COMMAND_ENV", "GIT_ALWAYS_CODE", "GIT_COMMAND_KEYS", "GIT_CONFIG_READS",
           "GIT_GLOBAL_FLAGS", "GIT_GLOBAL_VALUED", "GIT_SAFE_KEYS", "SHELLS", "SUBCOMMAND_CODE", "TABLE", "Finding",
           "Kind", "Program", "code_env", "env_command"]
