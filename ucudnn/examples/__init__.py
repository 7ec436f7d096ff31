"""Small programs to run under ``ucudnn run``."""
