"""Errors caused by what the user wrote or pointed at; the CLI prints them and exits with 2."""


class UserError(Exception):
    """A mistake the user can fix (bad config, missing folder, unreadable file): no traceback."""


class DataError(UserError):
    """A dataset problem: missing folder, unmatched pairs, unreadable image; names the path."""
