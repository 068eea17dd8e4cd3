package chat

import (
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// strftimeNow returns the strftime_now global bound to a clock. The engine's
// own strftime_now reads time.Now and knows only a handful of directives;
// prompts must be reproducible (goldens, tests, replays), so the time comes
// from the caller.
func strftimeNow(now func() time.Time) jinja.Value {
	return jinja.NewCallable("strftime_now", func(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), fmt.Errorf("strftime_now: expected one format string")
		}
		return jinja.NewString(strftime(args[0].AsString(), now())), nil
	})
}

var (
	longDays    = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	longMonths  = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	shortLength = 3
)

// strftime formats t like Python's time.strftime on glibc in the C locale,
// including glibc's '-' (no padding) flag that some templates use.
func strftime(format string, t time.Time) string {
	var sb strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			sb.WriteByte(c)
			continue
		}
		i++
		noPad := false
		if format[i] == '-' && i+1 < len(format) {
			noPad = true
			i++
		}
		num := func(n, width int) {
			if noPad {
				fmt.Fprintf(&sb, "%d", n)
			} else {
				fmt.Fprintf(&sb, "%0*d", width, n)
			}
		}
		spaceNum := func(n int) {
			if noPad {
				fmt.Fprintf(&sb, "%d", n)
			} else {
				fmt.Fprintf(&sb, "%2d", n)
			}
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		switch format[i] {
		case 'a':
			sb.WriteString(longDays[t.Weekday()][:shortLength])
		case 'A':
			sb.WriteString(longDays[t.Weekday()])
		case 'b', 'h':
			sb.WriteString(longMonths[t.Month()-1][:shortLength])
		case 'B':
			sb.WriteString(longMonths[t.Month()-1])
		case 'c':
			sb.WriteString(strftime("%a %b %e %H:%M:%S %Y", t))
		case 'C':
			num(t.Year()/100, 2)
		case 'd':
			num(t.Day(), 2)
		case 'D':
			sb.WriteString(strftime("%m/%d/%y", t))
		case 'e':
			spaceNum(t.Day())
		case 'F':
			sb.WriteString(strftime("%Y-%m-%d", t))
		case 'G':
			y, _ := t.ISOWeek()
			num(y, 4)
		case 'g':
			y, _ := t.ISOWeek()
			num(y%100, 2)
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num(hour12, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'k':
			spaceNum(t.Hour())
		case 'l':
			spaceNum(hour12)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'n':
			sb.WriteByte('\n')
		case 'p':
			if t.Hour() < 12 {
				sb.WriteString("AM")
			} else {
				sb.WriteString("PM")
			}
		case 'P':
			if t.Hour() < 12 {
				sb.WriteString("am")
			} else {
				sb.WriteString("pm")
			}
		case 'r':
			sb.WriteString(strftime("%I:%M:%S %p", t))
		case 'R':
			sb.WriteString(strftime("%H:%M", t))
		case 's':
			fmt.Fprintf(&sb, "%d", t.Unix())
		case 'S':
			num(t.Second(), 2)
		case 't':
			sb.WriteByte('\t')
		case 'T', 'X':
			sb.WriteString(strftime("%H:%M:%S", t))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1)
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2)
		case 'V':
			_, w := t.ISOWeek()
			num(w, 2)
		case 'w':
			num(int(t.Weekday()), 1)
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2)
		case 'x':
			sb.WriteString(strftime("%m/%d/%y", t))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 1)
		case 'z':
			sb.WriteString(t.Format("-0700"))
		case 'Z':
			name, _ := t.Zone()
			sb.WriteString(name)
		case '%':
			sb.WriteByte('%')
		default:
			// glibc prints unknown conversions unchanged.
			sb.WriteByte('%')
			if noPad {
				sb.WriteByte('-')
			}
			sb.WriteByte(format[i])
		}
	}
	return sb.String()
}
