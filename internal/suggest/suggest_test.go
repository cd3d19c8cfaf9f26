package suggest

import "testing"

func TestNearest(t *testing.T) {
	known := []string{"command", "inputs", "outputs", "check", "category"}
	tests := []struct{ name, want string }{
		{"comand", "command"},
		{"ouputs", "outputs"},
		{"chekc", "check"},
		{"command", "command"},
		{"zzz", ""},
		{"x", ""}, // one edit from nothing useful: too short to guess
		{"inptus", "inputs"},
		{"categroy", "category"},
	}
	for _, tt := range tests {
		if got := Nearest(tt.name, known); got != tt.want {
			t.Errorf("Nearest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{"comand", "command", 1},
		{"same", "same", 0},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
