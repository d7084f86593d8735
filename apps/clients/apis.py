from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.base import TenantAPIView
from apps.clients.serializers import ClientOutSerializer


class CurrentClientApi(TenantAPIView):
    """The client the credentials belong to (handy to check an API key)."""

    @extend_schema(responses=ClientOutSerializer, summary="The authenticated client")
    def get(self, request: Request) -> Response:
        return Response(ClientOutSerializer(self.client).data)
