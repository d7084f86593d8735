import pytest

from apps.accounts.models import ApiKey, Membership
from apps.tools.models import ClientTool
from tests.factories import ClientToolFactory, MembershipFactory

pytestmark = pytest.mark.django_db


def test_for_client_returns_only_that_tenants_rows(client_a, client_b):
    tool_a = ClientToolFactory(client=client_a, name="lookup")
    tool_b = ClientToolFactory(client=client_b, name="lookup")
    MembershipFactory(client=client_a)
    assert list(ClientTool.objects.for_client(client_a)) == [tool_a]
    assert list(ClientTool.objects.for_client(client_b)) == [tool_b]
    assert Membership.objects.for_client(client_b).count() == 0
    assert ApiKey.objects.for_client(client_a).count() == 0


def test_for_client_refuses_a_missing_tenant(client_a):
    with pytest.raises(ValueError, match="saved client"):
        ClientTool.objects.for_client(None)
