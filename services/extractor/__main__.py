from engram.http import run_main, serve_service
from services.extractor.app import create_app
from services.extractor.settings import ExtractorSettings

run_main(lambda: serve_service(ExtractorSettings, create_app, tokens=True))
