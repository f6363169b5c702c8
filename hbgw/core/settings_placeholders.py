"""Refuse `.env.example`'s placeholders: a role started on ``change-me…`` as a secret or as a
store password says which setting to replace, instead of running with a published secret."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr, model_validator

from hbgw.core.settings_quick import PLACEHOLDER, is_placeholder, url_password

# Store URLs whose password compose builds from a variable of its own .env.
URL_PASSWORDS = {
    "database_url": "POSTGRES_PASSWORD",
    "redis_url": "REDIS_PASSWORD",
    "broker_url": "HBGW_BROKER_URL",
}
REPLACE = "for example with the output of `openssl rand -hex 32`"


class PlaceholderCheck(BaseModel):
    @model_validator(mode="after")
    def _no_placeholder(self) -> PlaceholderCheck:
        for name in type(self).model_fields:
            value = getattr(self, name)
            setting = f"HBGW_{name.upper()}"
            if isinstance(value, SecretStr) and is_placeholder(value.get_secret_value()):
                raise ValueError(
                    f"{setting} is still a placeholder of .env.example ({PLACEHOLDER}…): "
                    f"replace it with a secret of your own, {REPLACE}"
                )
            url = value if name in URL_PASSWORDS and isinstance(value, str) else ""
            if url and is_placeholder(url_password(url)):
                raise ValueError(
                    f"the password in {setting} is still a placeholder of .env.example "
                    f"({PLACEHOLDER}…): replace it ({URL_PASSWORDS[name]} in compose's .env) "
                    f"with one of your own, {REPLACE}"
                )
        return self
