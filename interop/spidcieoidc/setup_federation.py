"""Makes fedproj's federation: the trust anchor (the server's root), the
SPID OpenID provider under oidc/op, and the relying party under test as a
subordinate of the anchor, holding the anchor's trust mark. Reads JSON on
stdin: {"rp": its entity identifier, "rp_jwks": its federation public
keys}. Writes JSON to stdout: the anchor's entity identifier and public
keys, the OP's entity identifier, the RP's trust mark, and the user's
credentials. Run with SPID_BASE and SPID_DB set, as the server is."""
import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedproj.settings")
import django  # noqa: E402

django.setup()
from django.core.management import call_command  # noqa: E402

call_command("migrate", verbosity=0)

from spid_cie_oidc.accounts.models import User  # noqa: E402
from spid_cie_oidc.authority.models import (  # noqa: E402
    FederationDescendant,
    FederationEntityAssignedProfile,
    FederationEntityProfile,
)
from spid_cie_oidc.entity.jwks import public_jwk_from_private_jwk  # noqa: E402
from spid_cie_oidc.entity.models import FederationEntityConfiguration  # noqa: E402

req = json.load(sys.stdin)
base = os.environ["SPID_BASE"].rstrip("/")
ta_id, op_id = base + "/", base + "/oidc/op"
rp_mark, op_mark = base + "/openid_relying_party/public/", base + "/openid_provider/public/"

ta = FederationEntityConfiguration.objects.create(
    sub=ta_id,
    entity_type="federation_entity",
    is_active=True,
    trust_mark_issuers={rp_mark: [ta_id], op_mark: [ta_id]},
    metadata={
        "federation_entity": {
            "organization_name": "extauth interop trust anchor",
            "homepage_uri": base,
            "federation_fetch_endpoint": base + "/fetch",
            "federation_list_endpoint": base + "/list",
            "federation_resolve_endpoint": base + "/resolve",
            "federation_trust_mark_status_endpoint": base + "/trust_mark_status",
        }
    },
)

op_endpoint = op_id + "/"
op = FederationEntityConfiguration.objects.create(
    sub=op_id,
    entity_type="openid_provider",
    is_active=True,
    authority_hints=[ta_id],
    metadata={
        "federation_entity": {"organization_name": "SPID OIDC identity provider", "homepage_uri": base},
        "openid_provider": {
            "issuer": op_id,
            "authorization_endpoint": op_endpoint + "authorization",
            "token_endpoint": op_endpoint + "token",
            "userinfo_endpoint": op_endpoint + "userinfo",
            "revocation_endpoint": op_endpoint + "revocation",
            "introspection_endpoint": op_endpoint + "introspection",
            "client_registration_types_supported": ["automatic"],
            "code_challenge_methods_supported": ["S256"],
            "request_authentication_methods_supported": {"ar": ["request_object"]},
            "acr_values_supported": [
                "https://www.spid.gov.it/SpidL1",
                "https://www.spid.gov.it/SpidL2",
                "https://www.spid.gov.it/SpidL3",
            ],
            "claims_parameter_supported": True,
            "claims_supported": ["given_name", "family_name", "email", "https://attributes.eid.gov.it/fiscal_number"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "scopes_supported": ["openid", "offline_access"],
            "organization_name": "SPID OIDC identity provider",
            "request_parameter_supported": True,
            "request_uri_parameter_supported": False,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query", "form_post"],
            "subject_types_supported": ["pairwise", "public"],
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
            "userinfo_encryption_alg_values_supported": ["RSA-OAEP", "RSA-OAEP-256"],
            "userinfo_encryption_enc_values_supported": ["A128CBC-HS256", "A256CBC-HS512", "A128GCM", "A256GCM"],
            "userinfo_signing_alg_values_supported": ["RS256", "ES256"],
            "request_object_signing_alg_values_supported": ["RS256", "ES256"],
        },
    },
)
# The OP's ID token keys, inline: the public halves of its core keys,
# each with its use (its UserInfo endpoint looks the signing key up by it).
for k in op.jwks_core:
    k["use"] = "sig"
op.metadata["openid_provider"]["jwks"] = {"keys": [public_jwk_from_private_jwk(k) for k in op.jwks_core]}
op.save()

rp_profile = FederationEntityProfile.objects.create(
    name="RP public", profile_category="openid_relying_party", profile_id=rp_mark, trust_mark_template={}
)
op_profile = FederationEntityProfile.objects.create(
    name="OP public", profile_category="openid_provider", profile_id=op_mark, trust_mark_template={}
)
op_desc = FederationDescendant.objects.create(
    sub=op_id, name="SPID OP", type="openid_provider", jwks=op.public_jwks, is_active=True, status="valid"
)
op_tm = FederationEntityAssignedProfile.objects.create(descendant=op_desc, profile=op_profile, issuer=ta)
op.trust_marks = [op_tm.trust_mark]
op.save()

rp_desc = FederationDescendant.objects.create(
    sub=req["rp"], name="extauth", type="openid_relying_party", jwks=req["rp_jwks"], is_active=True, status="valid"
)
rp_tm = FederationEntityAssignedProfile.objects.create(descendant=rp_desc, profile=rp_profile, issuer=ta)

User.objects.create_user(
    username="rossi",
    password="interop-password",  # nosec: a throwaway test account
    email="antonio@example.it",
    attributes={
        "given_name": "Antonio",
        "family_name": "Rossi",
        "email": "antonio@example.it",
        "https://attributes.eid.gov.it/fiscal_number": "TINIT-RSSNTN80A01H501U",
    },
)

json.dump(
    {
        "ta": ta_id,
        "ta_jwks": {"keys": ta.public_jwks},
        "op": op_id,
        "op_trust_mark_type": op_mark,
        "rp_trust_mark_type": rp_mark,
        "rp_trust_mark": rp_tm.trust_mark_as_jws,
        "username": "rossi",
        "password": "interop-password",
    },
    sys.stdout,
)
