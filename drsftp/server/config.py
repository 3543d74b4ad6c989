"""`drsftp serve --config FILE`: the standing server's TOML file.

Keys are the long options of `drsftp serve` with ``_`` for ``-``
(``root``, ``port``, ``users``, ``tls_cert``, ``require_tls``,
``log_file``...); options given on the command line override the file.
Relative paths in the file are taken from the file's directory.  An
unknown key, a wrong type, a value out of range or a missing root is one
error naming the key and its line (or the option), raised before the
server listens.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from collections.abc import Callable
from typing import Any

from ..ftp.eblock import MAX_STREAMS
from .peers import address_problem, parse_peers


class ConfigError(ValueError):
    """A server setting that cannot be used: one sentence, before the server listens."""

# key -> (accepted types, what to call them in an error)
_INT, _FLOAT, _STR, _BOOL = ((int,), "an integer"), ((int, float), "a number"), ((str,), "a string"), \
    ((bool,), "true or false")
KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "root": _STR, "host": _STR, "port": _INT, "user": _STR, "password": _STR, "users": _STR,
    "anonymous_read": _BOOL, "idle_timeout": _FLOAT, "data_timeout": _FLOAT, "read_only": _BOOL,
    "tuning": _STR, "force_buffers": _BOOL, "passive_ports": _STR, "max_connections": _INT,
    "max_connections_per_ip": _INT, "log_file": _STR, "log_format": _STR, "tls_cert": _STR,
    "tls_key": _STR, "require_tls": _BOOL, "implicit_tls_port": _INT, "grace": _FLOAT, "max_streams": _INT,
    "max_streams_total": _INT, "metrics": _STR, "metrics_token": _STR, "metrics_token_file": _STR,
    "buffer_budget": ((str, int), "a size such as \"256MiB\", a number of bytes, or \"off\""),
    "data_interface": _STR, "masquerade_address": _STR, "http_port": _INT, "http_plain": _BOOL,
    "http_max_body": ((str, int), "a size such as \"10GiB\", or a number of bytes"),
    "macaroon_secret_file": _STR, "tpc_ca_file": _STR,
    "third_party_peers": ((str, list), "an array of addresses and networks, or one string of them separated by"
                          " commas"),
}
PATH_KEYS = ("root", "users", "tls_cert", "tls_key", "log_file", "metrics_token_file", "macaroon_secret_file",
             "tpc_ca_file")

# What `drsftp serve` uses for a key neither the file nor the command line sets.
DEFAULTS: dict[str, Any] = {
    "host": "127.0.0.1", "port": 2121, "user": None, "password": None, "users": None,
    "anonymous_read": False, "idle_timeout": 300.0, "data_timeout": 120.0, "read_only": False,
    "tuning": "drs", "force_buffers": False, "passive_ports": None, "max_connections": 256,
    "max_connections_per_ip": 32, "log_file": None, "log_format": "text", "tls_cert": None,
    "tls_key": None, "require_tls": False, "implicit_tls_port": None, "grace": 30.0, "buffer_budget": "256MiB",
    "max_streams": MAX_STREAMS, "max_streams_total": 256, "metrics": None, "metrics_token": None,
    "metrics_token_file": None, "data_interface": None, "masquerade_address": None, "third_party_peers": None,
    "http_port": None, "http_plain": False, "http_max_body": None, "macaroon_secret_file": None,
    "tpc_ca_file": None,
}
MIN_TOKEN = 16  # characters of a metrics token
LOG_FORMATS = ("text", "json")


# -- values: each rule says what is wrong with a value (None: nothing) -----------
def _port(v: int) -> str | None:
    return None if 0 <= v <= 65535 else f"must be 0-65535 (0: any free port), not {v}"


def _host(v: str) -> str | None:
    # "" would bind every interface unasked (getaddrinfo's wildcard)
    return None if v.strip() else ("must name an address: 127.0.0.1 (this host only), or 0.0.0.0 or ::"
                                   " to listen on every interface")


def _seconds(v: float) -> str | None:
    return None if math.isfinite(v) and v >= 0 else f"must be a number of seconds, 0 or more, not {v}"


def _count(v: int) -> str | None:
    return None if v >= 1 else f"must be 1 or more, not {v}"


def _limit(v: int) -> str | None:
    # (0: no limit, pyftpdlib's meaning of max_cons and max_cons_per_ip)
    return None if v >= 0 else f"must be 0 (no limit) or more, not {v}"


def port_range_problem(text: str) -> str | None:
    try:
        lo, hi = (int(x) for x in text.split("-", 1))
    except ValueError:
        return f"must look like 60000-60100 (LO-HI), not {text!r}"
    if not 1024 <= lo <= hi <= 65535:
        return f"must be LO-HI with 1024 <= LO <= HI <= 65535, not {text!r}"
    return None


def parse_port_range(text: str) -> tuple[int, int]:
    problem = port_range_problem(text)
    if problem:
        raise ConfigError(f"passive ports {problem}")
    lo, hi = (int(x) for x in text.split("-", 1))
    return lo, hi


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``ADDR:PORT``, ``[V6ADDR]:PORT``, or ``PORT`` alone (127.0.0.1)."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be ADDR:PORT such as 127.0.0.1:9300 ([::1]:9300, or PORT alone), not {text!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def _refused(check: Callable[[Any], object], v: Any, lead: str = "") -> str | None:
    """``check(v)``'s ValueError as a rule's sentence (after ``lead``); None: it passed."""
    try:
        check(v)
    except ValueError as exc:
        return f"{lead}{exc}"
    return None


def _metrics(v: str) -> str | None:
    return _refused(parse_metrics_address, v)


def token_problem(token: str) -> str | None:
    if len(token) < MIN_TOKEN or not re.fullmatch(r"[\x21-\x7e]+", token):
        return (f"must be at least {MIN_TOKEN} printable characters without spaces (openssl rand -hex 32 makes"
                " one)")
    return None


def read_token(path: str) -> str:
    """The metrics token in ``path`` (its first line)."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the metrics token file {path}: {getattr(exc, 'strerror', None) or exc}"
                          ) from exc
    problem = token_problem(token)
    if problem:
        raise ConfigError(f"the metrics token in {path} {problem}")
    return token


def _budget(v: str | int) -> str | None:
    if isinstance(v, int):  # (0: off)
        return None if v >= 0 else f"must be a size in bytes, or \"off\", not {v}"
    if v.strip().lower() == "off":
        return None
    from ..tuning import parse_size

    return _refused(parse_size, v, "must be a size such as \"256MiB\" or \"off\": ")


def _max_body(v: str | int) -> str | None:
    if isinstance(v, int):
        return None if v >= 1 else f"must be a size of 1 byte or more, not {v}"
    from ..tuning import parse_size

    try:
        return None if parse_size(v) >= 1 else "must be a size of 1 byte or more"
    except ValueError as exc:
        return f"must be a size such as \"10GiB\": {exc}"


def max_body_bytes(v: str | int | None) -> int | None:
    """http_max_body's value in bytes (checked by its rule)."""
    if v is None or isinstance(v, int):
        return v
    from ..tuning import parse_size

    return parse_size(v)


def _tuning(v: str) -> str | None:
    from ..tuning import check_spec

    return _refused(check_spec, v, "is not valid: ")


def _peers(v: str | list) -> str | None:
    return _refused(parse_peers, v)


RULES: dict[str, Callable[[Any], str | None]] = {
    # timeouts and connection limits: 0 is none, as pyftpdlib reads them
    "port": _port, "implicit_tls_port": _port, "host": _host, "idle_timeout": _seconds, "data_timeout": _seconds,
    "grace": _seconds, "max_connections": _limit, "max_connections_per_ip": _limit, "max_streams": _count,
    "max_streams_total": _count, "buffer_budget": _budget, "passive_ports": port_range_problem,
    "tuning": _tuning, "metrics": _metrics, "metrics_token": token_problem, "third_party_peers": _peers,
    "http_port": _port, "http_max_body": _max_body,
    "data_interface": address_problem, "masquerade_address": lambda v: address_problem(v, ipv4_only=True),
}


def _type_name(value: Any) -> str:
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def key_line(text: str, key: str) -> int | None:
    """The line that sets ``key`` (tomllib reports no line for a key)."""
    pattern = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*[=.\[]""")
    for no, line in enumerate(text.splitlines(), 1):
        if pattern.match(line) or line.strip() in (f"[{key}]", f"[[{key}]]"):
            return no
    return None


def check(data: dict[str, Any], text: str, path: str) -> dict[str, Any]:
    """The file's settings, checked: keys known, types right."""
    for key, value in data.items():
        where = f"{path}:{key_line(text, key) or '?'}"
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (keys are the long options of drsftp serve,"
                              " with _ for -)")
        types, want = KEYS[key]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise ConfigError(f"{where}: {key} must be {want}, not {_type_name(value)}")
        if key == "log_format" and value not in LOG_FORMATS:
            raise ConfigError(f"{where}: log_format must be \"text\" or \"json\", not {value!r}")
        problem = RULES[key](value) if key in RULES else None
        if problem:
            raise ConfigError(f"{where}: {key} {problem}")
    return data


def check_options(values: dict[str, Any]) -> None:
    """Values given as options (None: not given), checked by RULES."""
    for key, value in values.items():
        problem = RULES[key](value) if key in RULES and value is not None else None
        if problem:
            raise ConfigError(f"--{key.replace('_', '-')} {problem}")


def load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    values = check(data, text, path)
    base = os.path.dirname(os.path.abspath(path))
    for key in PATH_KEYS:
        if key in values and not os.path.isabs(values[key]):
            values[key] = os.path.join(base, values[key])
    return values


def merge(file_values: dict[str, Any], cli_values: dict[str, Any], path: str | None) -> dict[str, Any]:
    """Defaults, then the file, then what the command line gave (None: not given)."""
    merged = dict(DEFAULTS)
    merged.update(file_values)
    merged.update({k: v for k, v in cli_values.items() if v is not None})
    if not merged.get("root"):
        raise ConfigError(f"{path}: root is missing (the directory to serve)" if path
                          else "give --root DIR (the directory to serve) or --config FILE")
    if merged["log_format"] not in LOG_FORMATS:
        raise ConfigError(f"--log-format must be text or json, not {merged['log_format']!r}")
    check_options(cli_values)  # the file's were checked by check()
    if merged["tls_key"] and not merged["tls_cert"]:
        where = "--tls-key needs --tls-cert" if cli_values.get("tls_key") else f"{path}: tls_key needs tls_cert"
        raise ConfigError(f"{where} (the certificate the key belongs to)")
    if merged["implicit_tls_port"] is not None and not merged["tls_cert"]:
        where = ("--implicit-tls-port needs --tls-cert" if cli_values.get("implicit_tls_port") is not None
                 else f"{path}: implicit_tls_port needs tls_cert")
        raise ConfigError(f"{where} (implicit FTPS is TLS from the first byte)")
    if merged["metrics_token_file"]:
        if merged["metrics_token"]:
            raise ConfigError("give metrics_token or --metrics-token-file (metrics_token_file), not both")
        merged["metrics_token"] = read_token(merged["metrics_token_file"])
    return merged
