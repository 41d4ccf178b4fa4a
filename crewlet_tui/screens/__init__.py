"""The app's screens: one module per screen, plus the small dialogs in modals.py."""
