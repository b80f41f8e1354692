"""What the options of the commands commonly named in deny rules mean: the synonym table of :mod:`.options`.

One :class:`Grammar` per program (or ``git <subcommand>``). A *meaning* is a short name for what an option does
(``recursive``, ``force``); every spelling of it maps there (``-r``, ``-R``, ``--recursive``). A long option is
listed even without a synonym, so an abbreviation of it (``--rec``, which GNU getopt and git accept) is read as
every long option it abbreviates. Options the table does not list mean themselves (``-v`` means ``-v``).

A spelling may mean several things at once: ``git branch -D`` is ``--delete --force`` (its meanings, spaced),
so ``deny:Bash(git branch -D *)`` matches ``git branch --delete --force x`` and the other way round.
``implies``: a meaning that carries others, one way (``cp -a`` copies recursively; ``curl -d`` is a POST;
``--force-with-lease`` forces); implied meanings are added on both sides — the command's and the rule's — so
``deny:Bash(git push --force *)`` matches ``git push --force-with-lease`` (not the other way round).
``plus_operand``: an operand starting with ``+`` carries this meaning (``git push origin +main`` force-pushes).

Adding a program: list its options that a deny rule would name, with their synonyms, its valued options (so
their values are not read as operands) and its long options (for abbreviations). Keep meanings lower-case words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Grammar:
    """A program's options as far as matching needs: synonyms, values, implications."""

    names: Mapping[str, str] = field(default_factory=dict)  # spelling ("-r", "--recursive") -> meaning(s), spaced
    valued: frozenset[str] = frozenset()  # meanings whose option takes a value (next word, attached or =)
    implies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # meaning -> more ("name=VALUE" too)
    fold: frozenset[str] = frozenset()  # valued meanings whose values compare case-insensitively (HTTP methods)
    plus_operand: str | None = None  # an operand "+…" carries this meaning
    clusters: bool = True  # -rf is -r -f; False for programs with single-dash long options (find)

    def long_spellings(self) -> tuple[str, ...]:
        return tuple(s for s in self.names if s.startswith("--"))


def _names(**groups: tuple[str, ...]) -> dict[str, str]:
    """meaning=(spellings…) -> {spelling: meaning}; a meaning's underscores are dashes (force_with_lease)."""
    return {spelling: meaning.replace("_", "-") for meaning, spellings in groups.items() for spelling in spellings}


def _same(*spellings: str) -> dict[str, str]:
    """Long options with no synonym: each means itself without its dashes (listed for abbreviations)."""
    return {s: s.lstrip("-") for s in spellings}


_RECURSIVE = ("-r", "-R", "--recursive")
RM = Grammar({**_names(recursive=_RECURSIVE, force=("-f", "--force"), dir=("-d", "--dir"),
                       verbose=("-v", "--verbose"), interactive_always=("-i",), interactive_once=("-I",)),
              **_same("--interactive", "--one-file-system", "--no-preserve-root", "--preserve-root", "--help",
                      "--version")}, valued=frozenset())
_OWNERSHIP = Grammar({**_names(recursive=("-R", "--recursive"), changes=("-c", "--changes"), silent=("-f", "--silent",
                                                                                                    "--quiet"),
                               verbose=("-v", "--verbose")),
                      **_same("--reference", "--dereference", "--no-dereference", "--preserve-root",
                              "--no-preserve-root", "--from", "--help", "--version")},
                     valued=frozenset({"reference", "from"}))
_COPY = Grammar({**_names(recursive=_RECURSIVE, force=("-f", "--force"), archive=("-a", "--archive"),
                          target_directory=("-t", "--target-directory"), suffix=("-S", "--suffix")),
                 **_same("--remove-destination", "--no-clobber", "--update", "--backup", "--preserve", "--link",
                         "--symbolic-link", "--verbose", "--interactive", "--dereference", "--help", "--version")},
                valued=frozenset({"target-directory", "suffix"}), implies=MappingProxyType({"archive": ("recursive",)}))
_MOVE = Grammar({**_names(force=("-f", "--force"), target_directory=("-t", "--target-directory"),
                          suffix=("-S", "--suffix")),
                 **_same("--no-clobber", "--update", "--backup", "--verbose", "--interactive", "--help",
                         "--version")}, valued=frozenset({"target-directory", "suffix"}))
_FIND = Grammar({"-delete": "delete"}, clusters=False)

# git: what a deny names — a force push (-f, --force, --force-with-lease, --mirror, a "+" refspec), a hard
# reset, a forced clean or checkout, a branch deleted by force.
_GIT_PUSH = Grammar({**_names(force=("-f", "--force"), force_with_lease=("--force-with-lease",),
                              mirror=("--mirror",), delete=("-d", "--delete"), push_option=("-o", "--push-option"),
                              repo=("--repo",), receive_pack=("--receive-pack", "--exec"), all=("--all",),
                              tags=("--tags",), no_verify=("--no-verify",)),
                     **_same("--force-if-includes", "--no-force-with-lease", "--atomic", "--dry-run", "--porcelain",
                             "--prune", "--set-upstream", "--follow-tags", "--signed", "--verbose", "--quiet",
                             "--progress", "--thin", "--no-thin", "--ipv4", "--ipv6", "--recurse-submodules")},
                    valued=frozenset({"push-option", "repo", "receive-pack"}), plus_operand="force",
                    implies=MappingProxyType({"force-with-lease": ("force",), "mirror": ("force",)}))
_GIT_RESET = Grammar(_same("--hard", "--soft", "--mixed", "--merge", "--keep", "--quiet", "--patch", "--no-refresh",
                           "--recurse-submodules", "--pathspec-from-file", "--intent-to-add"))
_GIT_CLEAN = Grammar({**_names(force=("-f", "--force"), dirs=("-d",), ignored_too=("-x",), only_ignored=("-X",),
                               dry_run=("-n", "--dry-run"), quiet=("-q", "--quiet"), exclude=("-e", "--exclude"),
                               interactive=("-i", "--interactive"))}, valued=frozenset({"exclude"}))
_GIT_CHECKOUT = Grammar({**_names(force=("-f", "--force"), new_branch=("-b",), reset_branch=("-B",),
                                  quiet=("-q", "--quiet")),
                         **_same("--ours", "--theirs", "--detach", "--orphan", "--merge", "--track", "--no-track",
                                 "--patch", "--overwrite-ignore", "--conflict")},
                        valued=frozenset({"new-branch", "reset-branch", "orphan", "conflict"}))
_GIT_BRANCH = Grammar({**_names(delete=("-d", "--delete"), force=("-f", "--force"), move=("-m", "--move"),
                                copy=("-c", "--copy")),
                       "-D": "delete force", "-M": "move force", "-C": "copy force"})  # a spelling of two meanings

# curl/wget: what a request does (its method, what it sends, where it writes, whether it checks the peer)
_CURL_SENDS = ("-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "--data-ascii", "--json", "-F",
               "--form", "--form-string")
_CURL = Grammar({**_names(request=("-X", "--request"), data=_CURL_SENDS, upload_file=("-T", "--upload-file"),
                          head=("-I", "--head"), get=("-G", "--get"), output=("-o", "--output"),
                          remote_name=("-O", "--remote-name"), insecure=("-k", "--insecure"),
                          location=("-L", "--location"), header=("-H", "--header"), user=("-u", "--user"),
                          config=("-K", "--config"), silent=("-s", "--silent"), show_error=("-S", "--show-error"),
                          fail=("-f", "--fail"), user_agent=("-A", "--user-agent"), referer=("-e", "--referer"),
                          max_time=("-m", "--max-time"), cookie=("-b", "--cookie"), cookie_jar=("-c", "--cookie-jar"),
                          proxy=("-x", "--proxy"), url=("--url",))},
                valued=frozenset({"request", "data", "upload-file", "output", "header", "user", "config",
                                  "user-agent", "referer", "max-time", "cookie", "cookie-jar", "proxy", "url"}),
                implies=MappingProxyType({"data": ("request=POST",), "upload-file": ("request=PUT",),
                                          "head": ("request=HEAD",)}),
                fold=frozenset({"request"}))
_WGET = Grammar({**_names(output_document=("-O", "--output-document"), method=("--method",),
                          post_data=("--post-data", "--post-file", "--body-data", "--body-file"),
                          recursive=("-r", "--recursive"), quiet=("-q", "--quiet"), output_file=("-o", "--output-file"),
                          insecure=("--no-check-certificate",), user_agent=("-U", "--user-agent"),
                          header=("--header",))},
                valued=frozenset({"output-document", "method", "post-data", "output-file", "user-agent", "header"}),
                implies=MappingProxyType({"post-data": ("method=POST",)}), fold=frozenset({"method"}))

TABLE: Mapping[str, Grammar] = MappingProxyType({
    "rm": RM, "cp": _COPY, "mv": _MOVE, "chmod": _OWNERSHIP, "chown": _OWNERSHIP, "chgrp": _OWNERSHIP,
    "find": _FIND, "curl": _CURL, "wget": _WGET,
    "git push": _GIT_PUSH, "git reset": _GIT_RESET, "git clean": _GIT_CLEAN, "git checkout": _GIT_CHECKOUT,
    "git branch": _GIT_BRANCH,
})
DEFAULT = Grammar()  # a program not in the table: its options mean themselves; -abc is -a -b -c

__all__ = ["DEFAULT", "RM", "TABLE", "Grammar"]
