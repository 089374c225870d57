from engram.http import serve
from services.indexer.app import create_app
from services.indexer.settings import IndexerSettings

settings = IndexerSettings()
serve(create_app(settings), settings.host, settings.port)
