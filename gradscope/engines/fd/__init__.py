"""engines/fd"""
