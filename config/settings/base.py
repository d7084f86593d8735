"""Settings shared by every environment, assembled from one module per area
(`config/settings/parts/`). Everything that varies comes from the environment (django-environ);
see the env-var table in README.md. No name is set by two parts (tests/core/test_settings_reads.py),
so the order of these imports changes nothing; a part imports what it needs from the others."""

from config.settings.parts.accounts import *  # noqa: F403
from config.settings.parts.api import *  # noqa: F403
from config.settings.parts.billing import *  # noqa: F403
from config.settings.parts.capacity import *  # noqa: F403
from config.settings.parts.celery import *  # noqa: F403
from config.settings.parts.core import *  # noqa: F403
from config.settings.parts.database import *  # noqa: F403
from config.settings.parts.edge import *  # noqa: F403
from config.settings.parts.email import *  # noqa: F403
from config.settings.parts.events import *  # noqa: F403
from config.settings.parts.i18n import *  # noqa: F403
from config.settings.parts.insights import *  # noqa: F403
from config.settings.parts.knowledge import *  # noqa: F403
from config.settings.parts.llm import *  # noqa: F403
from config.settings.parts.mail_replies import *  # noqa: F403
from config.settings.parts.privacy import *  # noqa: F403
from config.settings.parts.reasoning import *  # noqa: F403
from config.settings.parts.tools import *  # noqa: F403
from config.settings.parts.widget import *  # noqa: F403
