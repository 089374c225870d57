from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import serve
from services.recall.app import create_app
from services.recall.settings import RecallSettings

settings, embedding = RecallSettings(), EmbeddingSettings()
app = create_app(settings, embedding=embedding)
serve(app, settings.host, settings.port, preflight=lambda: preflight(embedding))
