"""Objects named in the configuration by import path (`package.module:attribute`): retrievers, loaders.

Importing a module from the configuration runs its code: the configuration file is trusted like code.
"""

from __future__ import annotations

import importlib
from typing import Any, TypeVar

from pydantic import SecretStr

from evident.connectors.remote.http import read_secret
from evident.connectors.source import SourceConfigError

T = TypeVar("T")


def secret_setting(source: str, env: str | None, what: str, secrets: list[SecretStr]) -> SecretStr | None:
    """Source `source`'s credential in environment variable `env` (None when not configured), remembered in
    `secrets`."""
    value = read_secret(source, env, what)
    if value is not None:
        secrets.append(value)
    return value


def construct(source: str, path: str, raw_kwargs: dict[str, Any], kwargs_env: dict[str, str],
              kind: type[T], secrets: list[SecretStr]) -> T:
    """Source `source`'s `kind` object at import path `path`: an instance as is, or a class or factory called
    with the kwargs (and the values of the kwargs_env variables, never shown in an error)."""
    target = load_object(source, path)
    kwargs = dict(raw_kwargs)
    for key, env in kwargs_env.items():
        secret = secret_setting(source, env, f"the {key!r} argument", secrets)
        if secret is None:  # an empty variable name; one that is not set raised already
            raise SourceConfigError(source, f"kwargs_env.{key}: name an environment variable")
        kwargs[key] = secret.get_secret_value()
    what = f"LangChain {kind.__name__}"
    if isinstance(target, kind):
        if kwargs:
            raise SourceConfigError(source, f"{path} is a {kind.__name__} instance; it takes no kwargs")
        return target
    if not callable(target):
        raise SourceConfigError(source, f"{path} is not a {what}, class or factory")
    try:
        made = target(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a third-party constructor can raise anything
        message = f"{path}(...) failed: {type(exc).__name__}: {exc}"
        for secret in secrets:
            message = message.replace(secret.get_secret_value(), "***")
        raise SourceConfigError(source, message) from None
    if not isinstance(made, kind):
        raise SourceConfigError(source, f"{path} returned {type(made).__name__}, not a {what}")
    return made


def load_object(source: str, path: str) -> Any:
    """`package.module:attribute` (or `package.module.attribute`) imported."""
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise SourceConfigError(source, f"retriever must be 'package.module:attribute', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or whatever the module raises on import
        raise SourceConfigError(source, f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise SourceConfigError(source, f"{module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target
