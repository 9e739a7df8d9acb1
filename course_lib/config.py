"""One way to declare settings: a dataclass whose fields carry their help, giving validation, JSON and options.

    @dataclass
    class MyConfig(Config):
        lr: float = option(3e-3, "peak learning rate")

        def validate(self):
            require(self.lr > 0, f"lr must be positive, got {self.lr}")

`MyConfig(...)` validates itself; `to_dict` / `from_dict` / `save` / `load` read and write JSON
(an unknown or mistyped setting is a ConfigError that names it); `add_options(parser, MyConfig)`
makes every field a command-line option with its help and default, and `from_options` reads them
back. `course_lib.gru.ppo_config.PPOConfig` (the GRU's PPO, chapters 6-8) and `course_lib.lm.llm_rl.RLConfig`
(the language model's RL, chapters 10-11) are both declared this way, on one base: `course_lib.core.rl.RLSettings`,
the knobs of the RL core they share, each declared once (`override` gives a subclass its own default).
A config stored before a setting was renamed (a run's config.json or saved state) still loads: `RENAMED`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch


class ConfigError(ValueError):
    """A setting has a value that cannot be used. The message says which and why."""


# Settings renamed when both policies' settings took one name per knob (course_lib.core.rl.RLSettings): old name ->
# today's. `Config.from_dict` (and so `load`, a resumed run's config.json) and `renamed` read a stored config's old
# names as today's; the records keep the names they were written with.
RENAMED = {
    "episodes_per_task": "group_size",    # PPOConfig's (the GRU's) samples per task
    "clip_norm": "max_grad_norm",         # RLConfig's (the language model's) gradient-norm clip
    "timeout": "sandbox_timeout",         # RLConfig's seconds per program in the sandbox
    "rl_splits": "rollout_splits",        # PPOConfig's splits rolled out, then a comma-separated string
    "splits": "rollout_splits",           # RLConfig's
}


def renamed(data: dict, known=None) -> dict:
    """A stored config's settings under today's names (RENAMED); a name `known` lists stays as it is."""
    return {(RENAMED[k] if k in RENAMED and (known is None or k not in known) else k): v for k, v in data.items()}


def option(default, help: str, type=None, choices=None, nullable: bool = False):
    """A dataclass field with its one-line help, the type and choices its option accepts, and whether
    "none" is allowed (always, when the default is None)."""
    return dataclasses.field(default=default, metadata={"help": help, "type": type or builtins_type(default),
                                                        "choices": choices, "nullable": nullable})


def override(base, name: str, default):
    """The field `name` of the settings class `base` with another default; its help, type and checks stay the base's.

        @dataclass
        class PPOConfig(RLSettings):
            lr: float = override(RLSettings, "lr", 3e-3)
    """
    return dataclasses.field(default=default, metadata=base.__dataclass_fields__[name].metadata)


def resolve_device(name):
    """None / "auto": "cuda" when torch sees a GPU, else "cpu"; "cpu" and "cuda" / "cuda:N" (or such a
    torch.device) are returned as they are. Another kind, or a GPU this machine lacks, is a ConfigError
    that says what to pass instead."""
    if name in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        device = None
    require(device is not None and device.type in ("cpu", "cuda"), f"unknown device {name!r}; choose cpu, cuda "
                                                                   f"(cuda:N for the N-th GPU) or auto")
    if device.type == "cuda":
        found = torch.cuda.device_count() if torch.cuda.is_available() else 0
        require(found > (device.index or 0), f"device {str(name)!r}: torch sees {found or 'no'} CUDA GPU(s) on "
                                             f"this machine (torch {torch.__version__}); pass --device cpu, or auto")
    return name


DTYPES = ("auto", "float32", "float16", "bfloat16")  # a model's weights (`model_zoo.load_model`, `llm --dtype`)


def resolve_dtype(name, device) -> torch.dtype:
    """The dtype of a model's weights on `device` ("cpu", "cuda" or "cuda:N", as resolve_device returns it).

    None / "auto": float32 on a CPU; on a GPU, bfloat16 where the GPU computes in it (Ampere and later:
    `torch.cuda.is_bf16_supported(including_emulation=False)`), else float16 (a T4 or a V100, which only
    emulate bfloat16). A torch.dtype, or one of the names in DTYPES, is taken as it is; another name is a
    ConfigError that lists them.
    """
    if isinstance(name, torch.dtype):
        return name
    if name in (None, "auto"):
        if torch.device(device).type != "cuda":
            return torch.float32
        return torch.bfloat16 if gpu_computes_bfloat16(device) else torch.float16
    require(name in DTYPES, f"unknown dtype {name!r}; choose one of {', '.join(DTYPES)}")
    return getattr(torch, name)


def gpu_computes_bfloat16(device="cuda") -> bool:
    """Whether the GPU `device` has bfloat16 arithmetic of its own (emulation does not count)."""
    index = torch.device(device).index
    if index is None:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    with torch.cuda.device(index):
        return torch.cuda.is_bf16_supported(including_emulation=False)


def device_label(device: str) -> str:
    """What ran a record, for its readers: "cpu (2 threads)" or "cuda: NVIDIA H100 80GB HBM3"."""
    if torch.device(device).type == "cuda":
        return f"{device}: {torch.cuda.get_device_name(torch.device(device))}"
    return f"cpu ({torch.get_num_threads()} threads)"


def builtins_type(value):
    return type(value) if isinstance(value, (bool, int, float, str, tuple)) else str


def require(ok, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def coerce(f: dataclasses.Field, value, where: str):
    """A JSON or command-line value to the field's type, or a ConfigError that names the field."""
    typ = f.metadata["type"]
    if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
        if f.default is None or f.metadata.get("nullable"):
            return None
        raise ConfigError(f"{where}: {f.name} cannot be none")
    try:
        if typ is tuple:  # "train,val", ["train", "val"] and ["train,val"] alike
            items = [value] if isinstance(value, str) else value
            return tuple(p.strip() for x in items for p in str(x).split(",") if p.strip())
        if typ is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
                return value.lower() in ("true", "yes", "1")
            raise ValueError
        if typ is int and isinstance(value, float) and not value.is_integer():
            raise ValueError
        if typ in (int, float) and isinstance(value, bool):
            raise ValueError
        return typ(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {f.name} expects {typ.__name__}, got {value!r}") from None


class Config:
    """Base of the course's settings dataclasses: validation on creation, JSON in and out, replace."""

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError for a value the code cannot use (subclasses say which)."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, where: str = "the config"):
        known = {f.name: f for f in dataclasses.fields(cls)}
        data = renamed(data, known)
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{where}: unknown setting(s) {unknown}; known: {sorted(known)}")
        return cls(**{name: coerce(known[name], value, where) for name, value in data.items()})

    def save(self, path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path):
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path} is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: expected a JSON object of settings")
        return cls.from_dict(data, where=str(path))

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)  # dataclasses.replace calls __post_init__: validated


# -----------------------------------------------------------------------------
# the command line: every field an option, with its help and default

def add_options(group, cls, *, skip=(), rename: dict | None = None) -> None:
    """Add --field-name for each field of cls (not in skip); rename maps a field to another option name.
    Options not given stay absent from the parsed namespace (argparse.SUPPRESS), so defaults stay the dataclass's."""
    rename = rename or {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        dest = rename.get(f.name, f.name)
        flag = "--" + dest.replace("_", "-")
        default = f.default
        help_text = f"{f.metadata['help']} [{','.join(default) if isinstance(default, tuple) else default}]"
        if f.metadata["type"] is bool:
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                               help=help_text)
        elif f.metadata["type"] is tuple:  # --rollout-splits train val
            group.add_argument(flag, dest=dest, nargs="+", default=argparse.SUPPRESS, metavar="NAME", help=help_text)
        else:
            group.add_argument(flag, dest=dest, default=argparse.SUPPRESS, metavar=f.metadata["type"].__name__.upper(),
                               choices=f.metadata["choices"], help=help_text, type=_option_type(f))


def _option_type(f):
    def convert(text):
        try:
            return coerce(f, text, "option")
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e).replace("option: ", "")) from None
    convert.__name__ = f.metadata["type"].__name__
    return convert


def from_options(cls, args, base: dict | None = None, *, skip=(), rename: dict | None = None):
    """Defaults, then `base` (e.g. a resumed run's settings or a --config file), then the options given
    (skip and rename as given to add_options)."""
    data = dict(base or {})
    rename = rename or {}
    for f in dataclasses.fields(cls):
        dest = rename.get(f.name, f.name)
        if f.name not in skip and hasattr(args, dest):
            data[f.name] = getattr(args, dest)
    return cls.from_dict(data, where="the options")
