from rest_framework import serializers


class ClientOutSerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    plan = serializers.CharField(source="plan.slug")
    ai_mode = serializers.CharField()
    language = serializers.CharField()
    support_email = serializers.EmailField()
    widget_key = serializers.CharField()
    allowed_origins = serializers.ListField(child=serializers.CharField())
    greeting = serializers.CharField()
    show_sources = serializers.BooleanField()
    remember_conversation_hours = serializers.IntegerField()
