from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from django.utils.translation import gettext_lazy as _

from apps.api import views as core_views
from config.api_docs import docs_view, schema_view

# Staff sign in through allauth (e-mail + optional TOTP), never through the bare admin form,
# so MFA cannot be bypassed via /admin/login/.
admin.site.login = login_required(admin.site.login)  # type: ignore[method-assign]
admin.site.site_header = "GuideDesk"
admin.site.site_title = _("GuideDesk admin")
admin.site.index_title = _("Clients, conversations and billing")

# Under /api/ even Django's own error pages answer the JSON error shape (apps/api/error_views.py).
handler400 = "apps.api.error_views.bad_request"
handler403 = "apps.api.error_views.permission_denied"
handler404 = "apps.api.error_views.page_not_found"
handler500 = "apps.api.error_views.server_error"

urlpatterns = [
    path("", core_views.home, name="home"),
    path("healthz", core_views.healthz, name="healthz"),
    path("favicon.ico", core_views.favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/", include("allauth.urls")),
    path("console/", include("apps.console.urls")),
    path("widget/", include("apps.widget.views")),  # the chat iframe page
    # each e-mail channel's inbound webhook, posted by its provider (apps/mail/views.py)
    path("mail/", include("apps.mail.urls")),
    path("api/v1/", include("config.api_urls")),
    # staff only in production; API_DOCS_PUBLIC opens them (config/api_docs.py)
    path("api/schema/", schema_view, name="schema"),
    path("api/docs/", docs_view, name="api-docs"),
]
