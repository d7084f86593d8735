"""The tenant file's `languages` per client: shipped codes only, the default always allowed."""

from __future__ import annotations

import pytest

from apps.clients.models import Client
from apps.core.exceptions import ApplicationError
from apps.provisioning.files import load_tenant_file
from apps.provisioning.services import tenant_import
from tests.conftest import DEMO_TENANT

pytestmark = pytest.mark.django_db


def _data(**client: object) -> dict:
    data = load_tenant_file(DEMO_TENANT)
    data["clients"][0].update(client)
    return data


def test_the_demo_shop_answers_in_every_shipped_language():
    tenant_import(data=_data())
    shop = Client.objects.get(slug="trailhead")
    assert shop.language == "en"
    assert shop.languages == ["en", "es", "fr", "de", "pt", "it", "nl", "he", "ar"]


def test_languages_are_normalised_and_include_the_default():
    tenant_import(data=_data(language="es", languages=["he", "EN-gb", "he"]))
    shop = Client.objects.get(slug="trailhead")
    assert (shop.language, shop.languages) == ("es", ["es", "he", "en"])


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"languages": ["en", "xx"]}, "clients[0].languages"),
        ({"language": "klingon"}, "clients[0].language"),
    ],
)
def test_an_unshipped_language_is_refused_naming_the_field(fields, path):
    with pytest.raises(ApplicationError) as exc:
        tenant_import(data=_data(**fields))
    assert path in exc.value.extra["fields"], exc.value.extra
    assert not Client.objects.filter(slug="trailhead").exists()
