from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CertifyConfig(AppConfig):
    """The reliability certificate: the retail world its tasks run in
    (`apps.certify.retail`, plain Python), the `certify` command and its report. A surface on
    top of every app, next to provisioning."""

    name = "apps.certify"
    verbose_name = _("Reliability certificate")
    label = "certify"
