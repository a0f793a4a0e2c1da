"""Model cards, result cards and Hub publishing."""
