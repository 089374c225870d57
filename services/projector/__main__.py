from engram.http import run_main, serve_service
from services.projector.app import create_app
from services.projector.settings import ProjectorSettings

run_main(lambda: serve_service(ProjectorSettings, create_app, master_key=True))
