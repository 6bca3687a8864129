"""The trust anchor's federation API at the root, the OP under oidc/op,
and each entity's configuration under its entity identifier."""
from django.urls import path

from spid_cie_oidc.authority.urls import urlpatterns as ta_urlpatterns
from spid_cie_oidc.entity.urls import urlpatterns as entity_urlpatterns
from spid_cie_oidc.entity.views import entity_configuration
from spid_cie_oidc.provider.urls import urlpatterns as op_urlpatterns

urlpatterns = []
urlpatterns.extend(entity_urlpatterns)
urlpatterns.extend(ta_urlpatterns)
urlpatterns.extend(op_urlpatterns)
urlpatterns.append(
    path("oidc/op/.well-known/openid-federation", entity_configuration, name="op_entity_configuration")
)
