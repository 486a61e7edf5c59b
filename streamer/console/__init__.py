"""What a person sees on the terminal during a run: the progress line and the end summary."""
