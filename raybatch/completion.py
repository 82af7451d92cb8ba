"""Shell completion scripts made from the parser itself, so they list exactly the commands and flags."""

from __future__ import annotations

import argparse


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(option for action in parser._actions for option in action.option_strings)


def bash_script(parser: argparse.ArgumentParser) -> str:
    """A bash completion function for ``raybatch``: commands, then each command's flags."""
    subs = _subcommands(parser)
    cases = "\n".join(
        f'        {name}) words="{" ".join(_options(sub) + sorted(_subcommands(sub)))}" ;;'
        for name, sub in sorted(subs.items())
    )
    top = " ".join(sorted(subs) + _options(parser))
    return f"""# bash completion for raybatch: eval "$(raybatch completion bash)"
_raybatch() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} command="" words="{top}" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in -*) ;; *) command=${{COMP_WORDS[i]}}; break ;; esac
    done
    case $command in
{cases}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    [[ ${{#COMPREPLY[@]}} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -F _raybatch raybatch
"""


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """The bash function, loaded through zsh's bashcompinit."""
    return "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser)
