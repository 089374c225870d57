from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import serve
from services.indexer.app import create_app
from services.indexer.settings import IndexerSettings

settings, embedding = IndexerSettings(), EmbeddingSettings()
app = create_app(settings, embedding=embedding)
serve(app, settings.host, settings.port, preflight=lambda: preflight(embedding))
