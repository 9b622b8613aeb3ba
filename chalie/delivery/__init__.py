"""Delivery to the person away from the page: what a frame says as a message (items), the
services that carry it (senders: Web Push, Apprise, Telegram), and the retry policy.

The core floor: no threads and no actors (the Delivery actor in chalie/actors/delivery.py runs
the sends on a worker pool); it imports the store and the ground floor."""
