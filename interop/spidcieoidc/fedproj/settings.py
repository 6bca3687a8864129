"""Settings of fedproj: spid-cie-oidc's trust anchor (authority) and SPID
OpenID provider (provider) in one Django process, on the URL SPID_BASE
(http://127.0.0.1:PORT), with its database at SPID_DB. The values are those
of spid-cie-oidc's own example federation_authority, trimmed to what the
interop tests use; setup_federation.py makes the entities."""
import os

import aiohttp

BASE = os.environ["SPID_BASE"].rstrip("/")
BASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET_KEY = "extauth-interop-not-a-secret"  # nosec: a throwaway test server
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
APPEND_SLASH = False

# The trust anchor is the root of the server; the OP is under /oidc/op.
OIDCFED_DEFAULT_TRUST_ANCHOR = BASE + "/"
OIDCFED_TRUST_ANCHORS = [OIDCFED_DEFAULT_TRUST_ANCHOR]
OIDCFED_PROVIDER_PROFILE = "spid"
OIDCFED_PROVIDER_MAX_REFRESH = 10
# The OP admits only relying parties holding this trust mark, issued by
# the anchor (SPID's own rule).
OIDCFED_REQUIRED_TRUST_MARKS = [BASE + "/openid_relying_party/public/"]
OIDCFED_FEDERATION_TRUST_MARKS_PROFILES = {"openid_relying_party__public": {}}
HTTPC_PARAMS = {
    "connection": {"ssl": True},
    "session": {"timeout": aiohttp.ClientTimeout(total=8)},
}

AUTH_USER_MODEL = "spid_cie_oidc_accounts.User"
INSTALLED_APPS = [
    "spid_cie_oidc.accounts",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "spid_cie_oidc.entity",
    "spid_cie_oidc.authority",
    "spid_cie_oidc.provider",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "fedproj.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [os.path.join(BASE_DIR, "templates")],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SPID_DB"]}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"default": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "default"}},
    "loggers": {
        "spid_cie_oidc": {"handlers": ["console"], "level": "INFO"},
        "django.request": {"handlers": ["console"], "level": "WARNING"},
    },
}
