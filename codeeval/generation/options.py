"""The backend options (`--backend_option KEY=VALUE`, `backend_options:` in models.yaml), declared
once per backend: name, parser, default, a few words of help.

Why one table: `plan.check` refuses a misspelled name or a bad value in one line before any work
(a backend is built on a GPU worker, minutes later), and the backends read their options through
the same table (`parse`), so a name, default or parser lives here only. Importable without torch,
transformers or vllm; docs/generation.md's options table is `markdown()` (tests/test_docs_usage.py).
A default of None means the backend decides at run time (by device, environment or model); its
`default_text` says how, and where the machine decides it, `by_machine` is that rule (`resolve`).
Values may be strings (the CLI) or YAML scalars (a nightly's models.yaml).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from codeeval.core import yes_no
from codeeval.core.errors import did_you_mean

DECODERS = ("static", "dynamic")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")  # none with CUDA graphs of its own
QUERY_BLOCKS = (16, 32, 64, 128)  # Triton's tl.dot takes 16 rows at least
ENDPOINTS = ("completions", "chat")
EFFORTS = ("minimal", "low", "medium", "high")
API_KEY_BLOCK = "api_key_block"  # read by codeeval/tasks/secrets.py where the shard runs, never sent


class OptionError(ValueError):
    """A backend option the backend does not take, or a value its parser refuses. `str()` is the
    backend's message (a ValueError, as a constructor raises); `usage` the CLI's one line."""

    def __init__(self, message: str, usage: str):
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class Parser:
    """Turns a given value into the backend's; `what` is what it accepts, said to the user."""

    what: str
    convert: Callable[[str], Any]  # raises ValueError on a value outside `what`

    def __call__(self, value: Any) -> Any:
        return self.convert("" if value is None else str(value))  # a text is kept as given


def integer(low: int) -> Parser:
    def convert(text: str) -> int:
        value = int(text)
        if value < low:
            raise ValueError(text)
        return value
    return Parser(f"an integer >= {low}", convert)


def one_of(values: tuple[int, ...]) -> Parser:
    def convert(text: str) -> int:
        if int(text) not in values:
            raise ValueError(text)
        return int(text)
    return Parser(f"one of {', '.join(map(str, values))}", convert)


def number(low: float, high: Optional[float] = None, low_open: bool = False) -> Parser:
    def convert(text: str) -> float:
        value = float(text)
        if value != value or (value <= low if low_open else value < low) or (high is not None and value > high):
            raise ValueError(text)
        return value
    where = f"> {low:g}" if low_open else f">= {low:g}"
    return Parser(f"a number {where}" + (f" and <= {high:g}" if high is not None else ""), convert)


def _flag(text: str) -> bool:
    value = yes_no.parse(text) if text.strip() else False  # `KEY=` says no
    if value is None:
        raise ValueError(text)
    return value


FLAG = Parser(yes_no.WORDS, _flag)
TEXT = Parser("a text", lambda text: text)


def choice(values: tuple[str, ...]) -> Parser:
    def convert(text: str) -> str:
        if text not in values:
            raise ValueError(text)
        return text
    return Parser(f"one of {', '.join(values)}", convert)


@dataclass(frozen=True)
class Machine:
    """What a default decided at run time depends on: the device's type ("cuda", "cpu", ...) and
    whether the weights are bf16 or fp16."""
    device: str
    half: bool = False

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"


DRAFT_TOKENS = 10  # prompt-lookup draft tokens a row may propose per step, on a CPU (option prompt_lookup)


@dataclass(frozen=True)
class Option:
    name: str
    parser: Parser
    default: Any  # None: the backend decides at run time, as `default_text` says
    help: str
    default_text: str = ""
    by_machine: Optional[Callable[[Machine], Any]] = None  # that decision, where the machine makes it

    def shown_default(self) -> str:
        if self.default_text:
            return self.default_text
        if isinstance(self.default, bool):  # not a dict lookup: 1 and 1.0 equal True there
            return "yes" if self.default else "no"
        return "none" if self.default is None else str(self.default)


OPTIONS: dict[str, tuple[Option, ...]] = {
    "transformers": (
        Option("decoder", choice(DECODERS), None, "static: continuous batching over a static KV cache and "
               "CUDA graphs; dynamic: batches that shrink as rows end, prompt lookup",
               "static on a GPU, dynamic on a CPU", lambda m: "static" if m.gpu else "dynamic"),
        Option("compile", FLAG, None, "torch.compile the static decoder's forward", "yes on a GPU, no on a CPU",
               lambda m: m.gpu),
        Option("compile_mode", choice(COMPILE_MODES), "default", "Inductor's mode for `compile` "
               "(max-autotune-no-cudagraphs: minutes more of compiling; a mode with CUDA graphs of its own is "
               "refused, since the whole step is captured)"),
        Option("fuse_products", FLAG, None, "compiled: each layer's q/k/v and gate/up matrices held as one, one "
               "matrix product each (codeeval/generation/hf/kernels/fused_products.py)",
               "yes in bf16 and fp16, no in fp32", lambda m: m.half),
        Option("thin_products", integer(0), None, "compiled: steps of at most this many slots make their matrix "
               "products as Inductor's own reductions, not cuBLAS calls "
               "(codeeval/generation/hf/kernels/thin_products.py; "
               "one prompt then takes one slot, not 2); 0: never", "1 in bf16 and fp16, 0 in fp32",
               lambda m: int(m.half)),  # 2 rows: slower than cuBLAS (H100)
        Option("live_attention", integer(0), None, "compiled: steps of at least this many slots attend with "
               "FlexAttention to the blocks of each slot's own columns, not the whole cache "
               "(codeeval/generation/hf/kernels/live_attention.py; the SDPA step where it fails); 0: never",
               "1 in bf16 and fp16 on a GPU, else 0", lambda m: int(m.half and m.gpu)),  # H100: docs/generation.md
        Option("live_exact", FLAG, False, "live attention: each step compiled for its exact slot count on a GPU "
               "too, where Inductor picks FlexAttention's decoding kernel (a compile per slot count; a CPU "
               "always does)"),
        Option("live_query_block", one_of(QUERY_BLOCKS), None, "live attention: query rows of FlexAttention's "
               "kernel block (a step has one query per slot: the rest of a block is idle)",
               "16 on a GPU, else 128", lambda m: 16 if m.gpu else 128),  # H200: the kernel 1857 -> 750 us
        Option("compile_store", FLAG, True, "compiled: torch's compile artifacts of each step kept under the "
               "storage root (`compiled/`), where a fresh process on any host finds them "
               "(codeeval/generation/hf/compile_store.py)"),
        Option("cuda_graph", FLAG, True, "capture the static decoder's step as a CUDA graph"),
        Option("check_every", integer(1), 4, "static decoder: steps between host checks for stop strings"),
        Option("prefill_tokens", integer(1), None, "static decoder: padded prompt tokens a prefill takes",
               "4096 on a GPU, 1024 on a CPU", lambda m: 4096 if m.gpu else 1024),
        Option("batch_rows", integer(0), 0, "rows of a batch or slots of the static decoder "
               "(`--max_batch_rows` wins)", "0: by free memory"),
        Option("prompt_lookup", integer(0), None, "dynamic decoder: draft tokens a row may propose per step "
               "(0: off)", f"{DRAFT_TOKENS} on a CPU, 0 on a GPU", lambda m: DRAFT_TOKENS if m.device == "cpu" else 0),
        Option("step_tokens", integer(0), 48, "dynamic decoder with prompt lookup: positions a step scores "
               "beyond one per row"),
        Option("max_context", integer(1), None, "the model's context in tokens", "the model config's"),
    ),
    "openai": (
        Option("base_url", TEXT, None, "the server (also `--base_url`)",
               "OPENAI_BASE_URL, else https://api.openai.com/v1"),
        Option("api_key", TEXT, None, "sent as `Authorization: Bearer ...` (also `--api_key`; a deployment run "
               "refuses it)", "OPENAI_API_KEY"),
        Option(API_KEY_BLOCK, TEXT, None, "a Prefect Secret block holding the key, read where generation runs"),
        Option("endpoint", choice(ENDPOINTS), None, "the API the requests go to",
               "chat with --apply_chat_template, else completions"),
        Option("concurrency", integer(1), None, "requests in flight at most (halved while the server queues "
               "them)", "CODEEVAL_OPENAI_CONCURRENCY, else 8"),
        Option("max_retries", integer(0), 6, "retries of 408/409/425/429/5xx, network errors and stalls"),
        Option("timeout_s", number(0, low_open=True), 120.0, "seconds the server may send nothing on every "
               "request in flight before they are sent again (doubles after each stall)"),
        Option("stream", FLAG, True, "answers as server-sent events, a token a sign of life"),
        Option("backoff_s", number(0), 1.0, "first retry delay in seconds, doubled each time, with jitter"),
        Option("max_stop", integer(0), 4, "stop strings sent to the server (OpenAI's limit; post-processing "
               "cuts at the rest)"),
        Option("eos_text", TEXT, None, "the model's eos text, cut from answers like a stop string", "none"),
        Option("reasoning_effort", choice(EFFORTS), None, "a reasoning model's effort (`reasoning_effort`: "
               "OpenAI's, gpt-oss on vLLM)", "not sent"),
    ),
    "vllm": (
        Option("tensor_parallel_size", integer(1), 1, "GPUs one engine spreads over"),
        Option("gpu_memory_utilization", number(0, 1, low_open=True), 0.9, "share of GPU memory vLLM takes"),
        Option("max_model_len", integer(1), None, "the context in tokens", "the model's"),
        Option("enforce_eager", FLAG, None, "no CUDA graphs", "vLLM's (no)"),
        Option("swap_space", number(0), None, "CPU swap space per GPU, GiB", "vLLM's"),
    ),
    "reference": (),
    "replay": (),
}


def declared(kind: str) -> dict[str, Option]:
    return {o.name: o for o in OPTIONS.get(kind, ())}


Given = Union[Mapping[str, Any], Iterable[tuple[str, Any]]]


def parse(kind: str, given: Given) -> dict[str, Any]:
    """Every option of the `kind` backend: the given ones parsed, the others at their defaults.
    Raises OptionError on a name the backend does not take or a value its parser refuses."""
    table = declared(kind)
    values = {name: option.default for name, option in table.items()}
    for name, value in (given.items() if isinstance(given, Mapping) else given):
        option = table.get(name)
        if option is None:
            raise OptionError(f"{_shown(name)} is not an option of the {kind} backend", _unknown(kind, name, table))
        try:
            values[name] = option.parser(value)
        except ValueError:
            raise OptionError(f"backend option {name} must be {option.parser.what}, not {value!r}",
                              f"--backend_option {name}={value!r}: {option.parser.what}") from None
    return values


def resolve(kind: str, values: Mapping[str, Any], machine: Machine) -> dict[str, Any]:
    """`parse`'s values with every default the machine decides (None, with a `by_machine` rule)
    decided for `machine`: the one place those defaults are computed."""
    table = declared(kind)
    return {name: table[name].by_machine(machine) if value is None and name in table and table[name].by_machine
            else value for name, value in values.items()}


def _shown(name: Any) -> str:
    """A name as a message shows it: itself when plain, else quoted (a YAML key may hold a newline)."""
    return name if isinstance(name, str) and name.isprintable() and name.strip() == name and name else repr(name)


def _unknown(kind: str, name: Any, table: dict[str, Option]) -> str:
    if not table:
        return f"--backend_option {_shown(name)}: the {kind} backend takes no options"
    hint = f" ({close})" if (close := did_you_mean(name, table)) else ""
    return (f"--backend_option {_shown(name)}: not an option of the {kind} backend{hint}; "
            f"its options: {', '.join(table)}")


def markdown() -> str:
    """docs/generation.md's table of every backend's options."""
    rows = ["| backend | option | values | default | what it does |", "|---|---|---|---|---|"]
    for kind, options in OPTIONS.items():
        for o in options:
            rows.append(f"| {kind} | `{o.name}` | {o.parser.what} | {o.shown_default()} | {o.help} |")
    return "\n".join(rows) + "\n"
