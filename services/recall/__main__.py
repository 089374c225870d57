from engram.http import serve
from services.recall.app import create_app
from services.recall.settings import RecallSettings

settings = RecallSettings()
serve(create_app(settings), settings.host, settings.port)
