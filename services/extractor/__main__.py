from engram.http import serve
from services.extractor.app import create_app
from services.extractor.settings import ExtractorSettings

settings = ExtractorSettings()
serve(create_app(settings), settings.host, settings.port)
